"""`kora annotate` and `kora agreement`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from kora.errors import InputError
from kora.io import write_json


def _judged(target: str) -> list[Any]:
    from kora.analysis.records import judged, load_records

    folder = Path("results") / target / "judgments"
    files = sorted(folder.rglob("*.jsonl"))
    if not files:
        raise InputError(f"{folder}: no judged conversations (run the target first)")
    return judged(load_records(files))


def sample_keys(target: str, size: int, seed: int, records: list[Any]) -> list[str]:
    """The target's sample: drawn once, kept in annotations/sample.json for everyone."""
    from kora.analysis.annotate.sample import draw

    path = Path("results") / target / "annotations" / "sample.json"
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


def cmd_annotate(args: argparse.Namespace) -> int:
    from aiohttp import web

    from kora.analysis.annotate.labels import label_file
    from kora.analysis.annotate.server import build_app
    from kora.commands.main import taxonomy_of_args

    records = _judged(args.target)
    keys = sample_keys(args.target, args.size, args.seed, records)
    path = label_file(Path("results") / args.target / "annotations", args.annotator)
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


def cmd_agreement(args: argparse.Namespace) -> int:
    from kora.analysis.annotate.labels import read
    from kora.analysis.stats.human import agreement

    records = _judged(args.target)
    folder = Path("results") / args.target / "annotations"
    people: dict[str, Any] = {f.stem: read(f) for f in sorted(folder.glob("*.jsonl"))}
    if args.reference:
        # the reference run's judge, as one more rater on the same conversations
        import tempfile

        from kora.analysis.records import input_files, judged, load_records
        from kora.analysis.stats.human import judge_labels

        with tempfile.TemporaryDirectory(prefix="kora-reference-") as tmp:
            files = input_files(Path(args.reference), Path(tmp))
            reference = judge_labels(judged(load_records(files)))
        shared = set(reference) & {r.key for r in records}
        if not shared:
            raise InputError(f"{args.reference}: no test in common with {args.target}")
        people["reference"] = {k: reference[k] for k in shared}
    if not people:
        raise InputError(f"{folder}: no labels yet (kora annotate {args.target} --annotator NAME)")
    doc = agreement(records, people, seed=args.seed)
    out = Path("results") / args.target / "agreement.json"
    write_json(out, doc)
    for c, entry in doc["criteria"].items():
        a = entry.get("alpha")
        print(f"{c}: Krippendorff's alpha {'–' if a is None else a} {entry.get('alphaCI') or ''}")
        for pair, f in entry["pairs"].items():
            line = (f"  {pair}: n {f['n']}, exact {f['exact']:.0%} {f['exactCI'] or ''}, "
                    f"weighted kappa {f['kappa']} {f['kappaCI'] or ''}")  # fmt: skip
            if "countCorrelation" in f:
                line += f", count rho {f['countCorrelation']}"
            print(line)
        for pair, t in entry.get("triggered", {}).items():
            print(f"  {pair}: triggered or not, agree on {t['exact']:.0%} of {t['n']}")
    if doc["risks"]:
        worst = ", ".join(f"{r['risk']} {r['share']:.0%} of {r['n']}" for r in doc["risks"][:3])
        print(f"judges and people disagree on safety most for: {worst}")
    print(f"written: {out}; the report shows it from its next run "
          f"(snakemake --cores 2 results/{args.target}/report.html)")  # fmt: skip
    return 0


def add_arguments(sub: Any) -> None:
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
    an.set_defaults(func=cmd_annotate)
    ag = sub.add_parser(
        "agreement",
        help="how well the judges agree with the people who graded (kora annotate)",
    )
    ag.add_argument("target")
    ag.add_argument("--seed", type=int, default=0, help="the bootstrap's random seed")
    ag.add_argument(
        "--reference",
        help="the reference run's per-test results (folder, .zip or JSONL, as kora aggregate "
        "reads): its judge becomes one more rater, compared on the tests both judged",
    )
    ag.set_defaults(func=cmd_agreement)
