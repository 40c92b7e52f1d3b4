"""`kora aggregate PATH -o results.json`: per-test results (this project's judgment shards,
or the reference's per-test JSON of either version, in a folder or a .zip) -> scores."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kora.commands.common import configfile_option, force_option, taxonomy_dir, taxonomy_of_args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    a = sub.add_parser(
        "aggregate",
        help="per-test results (folder, .zip or JSONL; this project's, the reference's or "
        "KORA v2's, whose mechanism sums it keeps) -> results.json scores",
        description="Sum per-test results into results.json's scores: this project's "
        "judgment shards, or the reference implementation's per-test files of either "
        "version, in a folder, a .zip or a JSONL file.",
    )
    a.add_argument("path", help="the per-test results: a folder, a .zip, a JSONL or a JSON file")
    a.add_argument("-o", "--output", required=True, help="the results.json to write")
    force_option(a)
    configfile_option(a)
    a.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kora.analysis.aggregate import aggregate_path
    from kora.io import refuse_to_replace, remember_written, write_json

    output = Path(args.output)
    refuse_to_replace([output], args.force)
    taxonomy = taxonomy_of_args(args) if Path(taxonomy_dir(args)).exists() else None
    scores, failed = aggregate_path(Path(args.path), taxonomy)
    out: dict[str, object] = {"scores": scores}
    if failed:
        out["failed"] = failed
    write_json(output, out)
    remember_written([output])
    tests = sum(s["sums"]["al"] for s in scores)
    print(f"{args.output}: {tests} tests in {len(scores)} groups", file=sys.stderr)
    return 0
