"""`kora agreement TARGET`: how well the judges agree with the people who graded (and,
with --reference, with the reference run's judge); with --against PREVIOUS, whether the
judges got better since PREVIOUS (kora.analysis.stats.against)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kora.commands.annotate import judged_records, people_of, reference_records
from kora.commands.common import configfile_option, configfiles, layout_of_args, run_command
from kora.errors import InputError
from kora.io import write_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ag = sub.add_parser(
        "agreement",
        help="how well the judges agree with the people who graded (kora annotate)",
        description="Measure how often the judges give the grades people gave to this "
        "target's conversations (kora annotate), with bootstrap intervals; with "
        "--against, whether a changed judge agrees with people more than before.",
    )
    ag.add_argument("target", help="the target whose people's grades to compare with")
    ag.add_argument("--seed", type=int, default=0, help="the bootstrap's random seed")
    ag.add_argument(
        "--reference",
        help="the reference run's per-test results (folder, .zip or JSONL, as kora aggregate "
        "reads): its judge becomes one more rater, compared on the tests both judged",
    )
    ag.add_argument(
        "--against",
        metavar="PREVIOUS",
        help="the judges' grades before a judge prompt or model change: a saved agreement "
        "result (agreement.json, this target's own works: it is read before it is "
        "rewritten) or an earlier judgments folder; gives the change in agreement with "
        "people per criterion, with a paired bootstrap interval",
    )
    configfile_option(ag)
    ag.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kora.analysis.stats.against import compare, judge_grades, previous_grades
    from kora.analysis.stats.human import agreement

    layout = layout_of_args(args)
    records = judged_records(args)
    folder = Path(layout.annotations(args.target))
    people = people_of(folder)
    graded = dict(people)  # people only, not the reference judge
    old = previous_grades(Path(args.against), reference_records) if args.against else None
    if args.reference:
        # the reference run's judge, as one more rater on the same conversations
        from kora.analysis.stats.human import judge_labels

        reference = judge_labels(reference_records(args.reference))
        shared = set(reference) & {r.key for r in records}
        if not shared:
            raise InputError(f"{args.reference}: no test in common with {args.target}")
        people["reference"] = {k: reference[k] for k in shared}
    if not people:
        raise InputError(
            f"{folder}: no labels yet (kora annotate {args.target} --annotator NAME{configfiles(args)})"
        )
    doc = agreement(records, people, seed=args.seed)
    # the judges' grades of what people graded: what a later --against compares with
    doc["judgeGrades"] = judge_grades(records, {k for p in graded.values() for k in p})
    if old is not None:
        crits = list(doc["criteria"])
        changes = compare(old, doc["judgeGrades"], graded, crits, seed=args.seed)
        doc["against"] = {"previous": str(args.against), "criteria": changes}
    out = Path(layout.agreement_json(args.target))
    write_json(out, doc)
    for c, entry in doc["criteria"].items():
        a = entry.get("alpha")
        print(f"{c}: Krippendorff's alpha {'–' if a is None else a} {entry.get('alphaCI') or ''}")
        for pair, f in entry["pairs"].items():
            line = (
                f"  {pair}: n {f['n']}, exact {f['exact']:.0%} {f['exactCI'] or ''}, "
                f"weighted kappa {f['kappa']} {f['kappaCI'] or ''}"
            )
            if "countCorrelation" in f:
                line += f", count rho {f['countCorrelation']}"
            print(line)
        for pair, t in entry.get("triggered", {}).items():
            print(f"  {pair}: triggered or not, agree on {t['exact']:.0%} of {t['n']}")
    if "against" in doc:
        print_change(doc["against"])
    if doc["risks"]:
        worst = ", ".join(f"{r['risk']} {r['share']:.0%} of {r['n']}" for r in doc["risks"][:3])
        print(f"judges and people disagree on safety most for: {worst}")
    print(
        f"written: {out}; the report shows it from its next run "
        f"({run_command(args, [layout.report_html(args.target)])})"
    )
    return 0


def print_change(against: dict[str, Any]) -> None:
    print(
        f"the judges now against {against['previous']} (new - old, paired bootstrap 95% interval):"
    )
    for c, f in against["criteria"].items():
        verdict = "better" if f["agreement_change"] > 0 else "worse"
        sig = f"significantly {verdict}" if f["significant"] else "no significant change"
        line = (
            f"  {c}: n {f['n']}, exact {f['agreement_old']:.0%} -> {f['agreement_new']:.0%} "
            f"({f['agreement_change']:+.1%} [{f['agreement_low']:+.1%}, "
            f"{f['agreement_high']:+.1%}]): {sig}"
        )
        if f["kappa_change"] is not None:
            line += (
                f"; weighted kappa {f['kappa_change']:+.2f} [{f['kappa_low']:+.2f}, "
                f"{f['kappa_high']:+.2f}]"
            )
        print(line)
