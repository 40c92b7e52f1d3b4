"""`kora check-config`: config.yaml with any --configfile overlays, validated as a run
would, with the models near their end of life named."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kora.commands.common import configfile_option


def register(sub: Any) -> None:
    c = sub.add_parser(
        "check-config",
        help="validate config.yaml with any --configfile overlays merged over it",
        description="Check config.yaml, with every --configfile overlay merged over it, "
        "as a run checks it before its first job; models near or past their end of life "
        "are named.",
    )
    configfile_option(c)
    c.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kora.config.files import load_run_config
    from kora.llm.lifecycle import lifecycle_notes
    from kora.llm.structured import config_warnings

    cfg, _ = load_run_config(args.configfile)
    for note in lifecycle_notes(cfg.models, cfg.models):
        print(f"kora: warning: {note}", file=sys.stderr)
    for name, model in cfg.models.items():
        for note in config_warnings(name, model):
            print(f"kora: warning: {note}", file=sys.stderr)
    files = " + ".join(["config.yaml", *args.configfile])
    print(
        f"{files}: config OK: {len(cfg.models)} models, targets {', '.join(cfg.targets)}, "
        f"judges {', '.join(cfg.judges)}",
        file=sys.stderr,
    )
    return 0
