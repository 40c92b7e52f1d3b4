"""`kora check-config`: config.yaml with any --configfile overlays, validated as a run
would, with the models near their end of life named."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kora.commands.common import configfile_option
from kora.errors import ConfigError


def register(sub: Any) -> None:
    c = sub.add_parser(
        "check-config",
        help="validate config.yaml with any --configfile overlays merged over it",
        description="Check config.yaml, with every --configfile overlay merged over it, "
        "as a run checks it before its first job; models near or past their end of life "
        "are named.",
    )
    configfile_option(c)
    c.add_argument(
        "--config",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="values merged over the files, as Snakemake's --config (e.g. 'budget={usd: 5}')",
    )
    c.set_defaults(func=run)


def given_values(entries: list[str]) -> dict[str, Any]:
    """`--config KEY=VALUE ...` read as Snakemake reads them; one it refuses is named."""
    from kora.config.files import merge
    from kora.run.seam import parse_config

    out: dict[str, Any] = {}
    for entry in entries:
        try:
            out = merge(out, parse_config(entry))
        except ValueError as exc:
            key, _, value = entry.partition("=")
            if "." not in key:
                raise ConfigError(f"--config {entry}: Snakemake refuses it ({exc})") from None
            outer, *keys = key.split(".")
            inner = value
            for k in reversed(keys):
                inner = f"{{{k}: {inner}}}"
            raise ConfigError(
                f"--config {entry}: a key of the config's top level before `=`, as Snakemake "
                f"takes it; for a key under it give the mapping: --config '{outer}={inner}'"
            ) from None
    return out


def run(args: argparse.Namespace) -> int:
    from kora.config.files import load_run_config
    from kora.llm.lifecycle import lifecycle_notes
    from kora.llm.structured import config_warnings

    cfg, _ = load_run_config(args.configfile, given=given_values(args.config))
    for note in lifecycle_notes(cfg.models, cfg.models):
        print(f"kora: warning: {note}", file=sys.stderr)
    for name, model in cfg.models.items():
        for note in config_warnings(name, model):
            print(f"kora: warning: {note}", file=sys.stderr)
    files = " + ".join(["config.yaml", *args.configfile, *(["--config"] if args.config else [])])
    print(
        f"{files}: config OK: {len(cfg.models)} models, targets {', '.join(cfg.targets)}, "
        f"judges {', '.join(cfg.judges)}",
        file=sys.stderr,
    )
    return 0
