"""`kora import-conversations FILE`: recorded conversations to judge as a target of their
own (no model is called for them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kora.commands.common import configfile_option, layout_of_args, next_steps, taxonomy_of_args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ic = sub.add_parser(
        "import-conversations",
        help="recorded conversations to re-judge: JSONL of scenario, prompt, messages, "
        "modelId, or per-test result files (a folder, .zip or .json, as the reference run "
        "wrote them; their grades are left behind)",
        description="File recorded conversations as a target of their own: a run then "
        "has the config's judges grade them, and calls no target for them.",
    )
    ic.add_argument("file", help="a JSONL file, or a folder / .zip / .json of per-test results")
    ic.add_argument("--target", help="target name for every record (default: each modelId)")
    ic.add_argument(
        "--force",
        action="store_true",
        help="replace the conversations a run made for the target (not imported ones)",
    )
    configfile_option(ic)
    ic.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kora.run.ingest import import_conversations

    layout = layout_of_args(args)
    counts = import_conversations(
        Path(args.file),
        taxonomy_of_args(args),
        layout,
        target=args.target,
        force=args.force,
    )
    for name, n in counts.items():
        print(
            f"imported {n} conversations into {layout.target_dir(name)}/conversations/",
            file=sys.stderr,
        )
    entry = "{imported: true, prompts: [default, child]}"
    next_steps(args, layout, list(counts), "imported", entry, "to judge them")
    return 0
