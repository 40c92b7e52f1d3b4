"""`kora annotate TARGET --annotator NAME`: people grade a sample of a target's judged
conversations in the browser, each answer saved at once."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from kora.commands.common import (
    benchmark_of_args,
    configfile_option,
    layout_of_args,
    taxonomy_of_args,
)
from kora.errors import InputError
from kora.io import write_json


def register(sub: Any) -> None:
    an = sub.add_parser(
        "annotate",
        help="grade a sample of a target's judged conversations in the browser",
        description="Starts a grading page on 127.0.0.1: a sample of the target's judged "
        "conversations (stratified by risk, age range and judge grade; the same --seed, "
        "the same sample, shared by every annotator), without the judges' grades. Grade "
        "safety and each behaviour criterion (KORA v2: each mechanism) by keyboard (1/2/3, Tab, c+digit, n/p) or "
        "mouse; every answer is saved at once to results/TARGET/annotations/NAME.jsonl. "
        "Then: kora agreement TARGET.",
    )
    an.add_argument("target")
    an.add_argument("--annotator", required=True, help="your name (letters, digits, . _ -)")
    an.add_argument("--size", type=int, default=50, help="conversations in the sample")
    an.add_argument("--seed", type=int, default=1, help="the sample's random seed")
    an.add_argument("--port", type=int, default=8765)
    configfile_option(an)
    an.set_defaults(func=run)


def judged_records(args: argparse.Namespace) -> list[Any]:
    """The target's judged tests, refused when they are another version's than the
    config's."""
    from kora import benchmarks
    from kora.analysis.records import benchmark_of, judged, load_records

    folder = Path(layout_of_args(args).target_dir(args.target)) / "judgments"
    files = sorted(folder.rglob("*.jsonl"))
    if not files:
        raise InputError(f"{folder}: no judged conversations (run the target first)")
    records = judged(load_records(files))
    benchmarks.check_same(benchmark_of(records), benchmark_of_args(args), str(folder))
    return records


def sample_keys(folder: Path, size: int, seed: int, records: list[Any]) -> list[str]:
    """The target's sample: drawn once, kept in annotations/sample.json for everyone."""
    from kora.analysis.annotate.sample import draw

    path = folder / "sample.json"
    if path.exists():
        doc = orjson.loads(path.read_bytes())
        if (doc.get("size"), doc.get("seed")) != (size, seed):
            raise InputError(
                f"{path}: the sample was drawn with --size {doc.get('size')} --seed "
                f"{doc.get('seed')}; give those, or remove the file to draw another"
            )
        return list(doc["keys"])
    keys = draw(records, size, seed)
    write_json(path, {"size": size, "seed": seed, "keys": keys})
    return keys


def run(args: argparse.Namespace) -> int:
    from aiohttp import web

    from kora.analysis.annotate.labels import label_file
    from kora.analysis.annotate.server import build_app

    records = judged_records(args)
    folder = Path(layout_of_args(args).annotations(args.target))
    keys = sample_keys(folder, args.size, args.seed, records)
    path = label_file(folder, args.annotator)
    taxonomy = taxonomy_of_args(args)
    app = build_app(records, keys, path, args.annotator, args.target, taxonomy)
    print(
        f"kora annotate: {len(keys)} conversations of {args.target} for {args.annotator}; "
        f"labels saved to {path} on every answer. Open http://127.0.0.1:{args.port}/ "
        "(Ctrl-C stops; run the same command to go on).",
        file=sys.stderr,
        flush=True,
    )
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)
    return 0
