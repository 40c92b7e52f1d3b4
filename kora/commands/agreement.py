"""`kora agreement TARGET`: how well the judges agree with the people who graded (and,
with --reference, with the reference run's judge)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kora.commands.annotate import judged_records
from kora.commands.common import configfile_option, configfiles, layout_of_args
from kora.errors import InputError
from kora.io import write_json


def register(sub: Any) -> None:
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
    configfile_option(ag)
    ag.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kora.analysis.annotate.labels import read
    from kora.analysis.stats.human import agreement

    layout = layout_of_args(args)
    records = judged_records(args)
    folder = Path(layout.annotations(args.target))
    people: dict[str, Any] = {f.stem: read(f) for f in sorted(folder.glob("*.jsonl"))}
    if args.reference:
        # the reference run's judge, as one more rater on the same conversations
        import tempfile

        from kora.analysis.records import input_files, judged, load_records, zip_named
        from kora.analysis.stats.human import judge_labels

        with (
            tempfile.TemporaryDirectory(prefix="kora-reference-") as tmp,
            zip_named(args.reference, tmp),
        ):
            files = input_files(Path(args.reference), Path(tmp))
            reference = judge_labels(judged(load_records(files)))
        shared = set(reference) & {r.key for r in records}
        if not shared:
            raise InputError(f"{args.reference}: no test in common with {args.target}")
        people["reference"] = {k: reference[k] for k in shared}
    if not people:
        raise InputError(f"{folder}: no labels yet (kora annotate {args.target} --annotator NAME)")
    doc = agreement(records, people, seed=args.seed)
    out = Path(layout.agreement_json(args.target))
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
          f"(snakemake --cores 2 {layout.report_html(args.target)}{configfiles(args)})")  # fmt: skip
    return 0
