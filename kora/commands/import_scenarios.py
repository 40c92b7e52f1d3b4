"""`kora import-scenarios FILE.jsonl`: pre-built scenarios (the reference's JSONL shape) into
the data shards of the config's version; `--remove` switches back to generated ones."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kora.commands.common import configfile_option, layout_of_args, taxonomy_of_args
from kora.errors import KoraError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    i = sub.add_parser(
        "import-scenarios",
        help="pre-built scenarios (reference JSONL shape) into data/scenarios",
        description="File pre-built scenarios (one JSON object a line, in the reference's "
        "shape) as the scenario shards of the config's benchmark version, so a run "
        "converses from them instead of generating its own; --remove goes back.",
    )
    i.add_argument("file", nargs="?", help="JSONL of scenarios, one per line")
    i.add_argument(
        "--replace",
        "--force",
        dest="replace",
        action="store_true",
        help="replace generated scenarios already in data/",
    )
    i.add_argument(
        "--remove",
        action="store_true",
        help="remove imported scenarios: the workflow generates them from seeds again",
    )
    configfile_option(i)
    i.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kora.run.ingest import import_scenarios, remove_imported_scenarios

    layout = layout_of_args(args)
    where = f"{layout.data}/scenarios/"
    if args.remove:
        if args.file:
            raise KoraError("import-scenarios: give a FILE or --remove, not both")
        n = remove_imported_scenarios(layout)
        print(
            f"removed {n} imported scenarios from {where}; the next run generates "
            "scenarios from the seeds again (calls made before come from the store)",
            file=sys.stderr,
        )
        return 0
    if not args.file:
        raise KoraError("import-scenarios: give the FILE to import (or --remove)")
    counts = import_scenarios(Path(args.file), taxonomy_of_args(args), layout, replace=args.replace)
    print(
        f"imported {counts['scenarios']} scenarios into {counts['shards']} shards under "
        f"{where}; the workflow now tests targets on them without generating any",
        file=sys.stderr,
    )
    return 0
