"""`kora check-config [TARGET...]`: config.yaml with any --configfile overlays and --config
values, validated as a run would, with the models near their end of life named."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kora.commands.common import configfile_option, given_values, named_targets
from kora.errors import ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser(
        "check-config",
        help="validate config.yaml with any --configfile overlays merged over it",
        description="Check config.yaml, with every --configfile overlay and --config value "
        "merged over it, as a run of TARGETs (default: every target) checks it before its "
        "first job; models near or past their end of life are named.",
    )
    c.add_argument("targets", nargs="*", help="target names (default: every target)")
    configfile_option(c)
    c.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kora import benchmarks
    from kora.benchmarks.showcase import check_templates
    from kora.config.checks import unpriced_for_budget
    from kora.config.files import load_run_config
    from kora.llm.lifecycle import lifecycle_notes
    from kora.llm.providers.structured import config_warnings
    from kora.run.preflight import models_for_jobs
    from kora.run.stages import ORDER

    typed = named_targets(args, args.targets)
    cfg, taxonomy = load_run_config(args.configfile, given=given_values(args))
    # as a test of each of the run's risks: `kora plan` renders every test's prompts
    version = benchmarks.get(cfg.benchmark)
    check_templates(version, taxonomy, cfg.prompts_folder(Path(".")), cfg.risks(taxonomy))
    for note in lifecycle_notes(cfg.models, cfg.models):
        print(f"kora: warning: {note}", file=sys.stderr)
    for name, model in cfg.models.items():
        for note in config_warnings(name, model):
            print(f"kora: warning: {note}", file=sys.stderr)
    files = " + ".join(["config.yaml", *args.configfile, *(["--config"] if args.config else [])])
    # a run's check before its first call, for the models each target's run may call
    for target in typed or cfg.targets:
        called = models_for_jobs(cfg, [(stage, {"target": target}) for stage in ORDER])
        if problem := unpriced_for_budget(cfg, called):
            raise ConfigError(f"{files}: a run of {target} is refused: {problem}")
    print(
        f"{files}: config OK: {len(cfg.models)} models, targets {', '.join(cfg.targets)}, "
        f"judges {', '.join(cfg.judges)}",
        file=sys.stderr,
    )
    return 0
