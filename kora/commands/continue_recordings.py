"""`kora continue FILE`: recorded conversations filed per grid cell, to be carried on to
each risk's length with the target they were recorded with, then judged."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kora.commands.common import configfile_option, layout_of_args, next_steps, taxonomy_of_args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    co = sub.add_parser(
        "continue",
        help="recorded conversations to carry on to each risk's length with the target they "
        "were recorded with, then judge (only the missing turns are asked)",
        description="File recorded conversations per grid cell; a run then carries each "
        "on to its risk's length with the target it was recorded with, asking only the "
        "turns that are missing, and judges the result.",
    )
    co.add_argument("file", help="JSONL of scenario, prompt, messages, modelId (whole turns)")
    co.add_argument("--target", help="target name for every record (default: each modelId)")
    co.add_argument("--risk-ids", help="comma-separated risk ids to take (default: all)")
    co.add_argument("--target-models", help="comma-separated modelIds to take (default: all)")
    co.add_argument(
        "--limit-per-risk", type=int, help="the first N records of each risk, by test key"
    )
    configfile_option(co)
    co.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kora.run.continuation import stage_recordings

    def names(value: str | None) -> list[str] | None:
        return None if value is None else [v.strip() for v in value.split(",") if v.strip()]

    layout = layout_of_args(args)
    counts = stage_recordings(
        Path(args.file),
        taxonomy_of_args(args),
        layout,
        target=args.target,
        risk_ids=names(args.risk_ids),
        target_models=names(args.target_models),
        limit_per_risk=args.limit_per_risk,
    )
    for name, n in counts.items():
        print(
            f"filed {n} recorded conversations under {layout.target_dir(name)}/recorded/",
            file=sys.stderr,
        )
    # MODEL: the model they were recorded with
    entry = "{model: MODEL, continued: true}"
    then = "to carry them on to each risk's length and judge them"
    next_steps(args, layout, list(counts), "continued", entry, then)
    return 0
