"""`kora annotate TARGET --annotator NAME`: people grade a target's judged conversations in
the browser, each answer saved at once; the uniform sample for estimation, or a review
queue (`--queue`); or people's grades imported from a file (`--import FILE`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kora.commands.common import (
    benchmark_of_args,
    configfile_option,
    layout_of_args,
    named_targets,
    taxonomy_of_args,
)
from kora.errors import InputError

if TYPE_CHECKING:
    from kora.analysis.records import TestRecord
    from kora.analysis.stats.people import Labels


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    an = sub.add_parser(
        "annotate",
        help="grade a target's judged conversations in the browser, or import grades",
        description="Starts a grading page on 127.0.0.1 over the target's judged "
        "conversations, without the judges' grades. --queue estimate (the default): a "
        "random sample (--design uniform, or stratified: more of the conversations the "
        "judge failed), the same for the same --seed and shared by every annotator, whose "
        "grades correct the report's rates, with how many grades reach --width; judges / "
        "reference / risks: "
        "where the judges disagree with each other, with the reference run's judge "
        "(--reference), or the risks where judge and people disagree most so far (kept "
        "apart from the estimate). Grade safety and each behaviour criterion (KORA v2: "
        "each mechanism) by keyboard (1/2/3, Tab, c+digit, n/p) or mouse; every answer is "
        "saved at once to results/TARGET/annotations/NAME.jsonl. --import FILE adds "
        "grades made elsewhere (docs/people-and-judges.md). Then: kora agreement TARGET.",
    )
    an.add_argument("target", help="the target whose judged conversations to grade")
    an.add_argument("--annotator", help="your name (letters, digits, . _ -)")
    an.add_argument(
        "--queue",
        default="estimate",
        choices=["estimate", "judges", "reference", "risks", "review"],
        help="what to grade: estimate (the uniform sample, default), judges, reference, "
        "risks; with --import: estimate or review",
    )
    an.add_argument(
        "--size",
        type=int,
        help="conversations the page offers (100); --queue estimate: the sample's size when "
        "it is drawn, fixed from then on",
    )
    an.add_argument("--seed", type=int, default=1, help="the sample's random seed")
    an.add_argument(
        "--design",
        choices=["uniform", "stratified"],
        help="the sample for estimation, when it is drawn: uniform (the default), or "
        "stratified on the judge's safety grade, its failing conversations drawn more often "
        "(fewer grades for the same certainty where the judge errs; "
        "docs/people-and-judges.md); once drawn, the sample keeps its design",
    )
    an.add_argument(
        "--width",
        type=float,
        default=0.05,
        help="the width of the corrected safety failing rate's 95%% interval to plan for: "
        "how many grades reach it is said (default 0.05, five points)",
    )
    an.add_argument(
        "--port", type=int, default=8765, help="the grading page's port on 127.0.0.1 (8765)"
    )
    an.add_argument(
        "--reference",
        help="--queue reference: the reference run's per-test results (folder, .zip or "
        "JSONL, as kora aggregate reads)",
    )
    an.add_argument("--import", dest="import_file", help="add people's grades from this JSONL file")
    configfile_option(an)
    an.set_defaults(func=run)


def judged_records(args: argparse.Namespace) -> list[TestRecord]:
    """The target's judged tests, refused when they are another version's than the
    config's."""
    from kora import benchmarks
    from kora.analysis.records import benchmark_of, judged, load_records
    from kora.commands.stats import warn_if_mock

    args.target = named_targets(args, [args.target], results=True)[0]
    folder = Path(layout_of_args(args).target_dir(args.target)) / "judgments"
    files = sorted(folder.rglob("*.jsonl"))
    if not files:
        raise InputError(f"{folder}: no judged conversations (run the target first)")
    records = judged(load_records(files))
    benchmarks.check_same(benchmark_of(records), benchmark_of_args(args), str(folder))
    warn_if_mock([folder], "grading them measures nothing")
    return records


def reference_records(path: Path | str) -> list[TestRecord]:
    """The judged tests of a reference run (a folder, .zip or JSON/JSONL of per-test
    results)."""
    import tempfile

    from kora.analysis.records import input_files, judged, load_records

    with tempfile.TemporaryDirectory(prefix="kora-reference-") as tmp:
        return judged(load_records(input_files(Path(path), Path(tmp))))


def people_of(folder: Path) -> dict[str, Labels]:
    """Every annotator's labels in a target's annotations folder, all queues merged."""
    from kora.analysis.annotate.labels import read

    return {f.stem: read(f) for f in sorted(folder.glob("*.jsonl"))}


def say(text: str) -> None:
    print(f"kora annotate: {text}", file=sys.stderr, flush=True)


def estimate_keys(
    folder: Path, records: list[TestRecord], args: argparse.Namespace
) -> tuple[list[str], dict[str, Any]]:
    """The drawn sample's keys still judged, in its order, and the sample."""
    from kora.analysis.annotate import sample

    if args.size is not None and args.size < 1:
        raise InputError(f"--size {args.size}: at least 1 conversation")
    doc, note = sample.ensure(folder, records, args.seed, args.design, people_of(folder), args.size)
    if note:
        say(note)
    judged = {r.key for r in records}
    newer = judged - set(doc["keys"])
    if newer:
        say(
            f"warning: {len(newer)} judged conversations are newer than the sample and "
            "never in it, so the report gives no corrected rates; remove "
            f"{folder / sample.SAMPLE} to draw a new sample (a new estimate)"
        )
    return [k for k in sample.drawn(doc) if k in judged], doc


def plan(folder: Path, records: list[TestRecord], doc: dict[str, Any], width: float) -> str:
    """How many grades bring the corrected safety failing rate's 95 % interval to
    `width`, from the judge's grades and people's grades of the sample so far."""
    from kora.analysis.annotate import labels, sample
    from kora.analysis.stats.design import FAILING, allocation, grades_for, guess

    strata = sample.strata_of(records)
    total = sum(map(len, strata.values()))
    share = len(strata[FAILING]) / total if total else 0.0
    mine = {f.stem: labels.read(f, str(doc["id"])) for f in sorted(folder.glob("*.jsonl"))}
    seen = sample.seen_by_stratum(strata, mine)
    g = guess(share, seen)
    shares = doc.get("shares") if doc.get("design") == sample.STRATIFIED else None
    needed, alone = grades_for(width, share, g, shares)
    so_far = sum(n for _, n in seen.values())
    if needed > total:
        # the estimand is the rate of the population these conversations come from: more
        # grades than conversations would not narrow it further
        text = (
            f"no number of grades of these {total} conversations gives the safety failing "
            f"rate, corrected, a 95% interval {width:.0%} wide (about {needed} would be "
            f"needed; people's grades alone: {alone}): run more conversations, or plan "
            "for a wider --width; "
        )
    else:
        text = (
            f"about {needed} grades give the safety failing rate, corrected, a 95% interval "
            f"{width:.0%} wide (people's grades alone: {alone}); "
        )
    if doc.get("design") == sample.UNIFORM:
        other, _ = grades_for(width, share, g, allocation(share, g))
        if other < needed:
            text += f"a --design stratified sample would need about {other}; "
    return text + (
        f"from the judge's grades and {so_far} of people's so far"
        if so_far
        else "a guess until people have graded some (half the judge's failing grades wrong)"
    )


def import_grades(args: argparse.Namespace, records: list[TestRecord], folder: Path) -> int:
    from kora.analysis.annotate import labels
    from kora.analysis.records import criteria_of

    if args.queue not in labels.IMPORT_QUEUES:
        raise InputError("--import takes --queue estimate or --queue review")
    entries = labels.read_import(Path(args.import_file))
    known = {r.key for r in records}
    criteria = set(criteria_of(records))
    mark: dict[str, str] = {"queue": args.queue, "source": "import"}
    drawn: list[str] = []
    if args.queue == labels.ESTIMATE:
        drawn, doc = estimate_keys(folder, records, args)
        mark["sample"] = str(doc["id"])
    held = set(drawn)
    bad, by_person, aside = [], dict[str, list[dict[str, object]]](), set()
    for i, (who, answer) in enumerate(entries, 1):
        who = who or args.annotator
        if who is None:
            bad.append(f"grade {i}: no annotator (give --annotator or an `annotator` field)")
        elif answer["key"] not in known:
            bad.append(f"grade {i}: {answer['key']!r} is not a judged test of {args.target}")
        elif answer["criterion"] not in criteria:
            bad.append(f"grade {i}: {answer['criterion']!r} is not a criterion of this run")
        elif args.queue == labels.ESTIMATE and answer["key"] not in held:
            # chosen by someone, not drawn: it would bias the corrected rates
            aside.add(answer["key"])
            by_person.setdefault(who, []).append({**answer, "queue": "review", "source": "import"})
        else:
            by_person.setdefault(who, []).append({**answer, **mark})
    if bad:
        raise InputError(
            "; ".join(bad[:10]) + (f" (and {len(bad) - 10} more)" if len(bad) > 10 else "")
        )
    for who, answers in by_person.items():
        labels.extend(labels.label_file(folder, who), answers)
    graded = {a["key"] for answers in by_person.values() for a in answers} - aside
    say(
        f"imported {len(entries)} grades of {len(graded | aside)} conversations for "
        f"{', '.join(by_person)} ({args.queue}) into {folder}"
    )
    if aside:
        say(
            f"{len(aside)} of those conversations {'is' if len(aside) == 1 else 'are'} not "
            f"in the drawn sample (its first {len(drawn)}): their grades went to the review "
            "queue, for agreement, not the corrected rates"
        )
    if args.queue == labels.ESTIMATE and graded:
        reach = max(i for i, k in enumerate(drawn) if k in graded) + 1
        covered = len(graded & set(drawn[:reach]))
        if covered < reach:
            say(
                f"warning: they cover {covered} of the sample's first {reach} "
                "conversations: the ones passed over count as skipped, and the estimate is "
                "sound only if nothing in them decided the skipping"
            )
    return 0


def run(args: argparse.Namespace) -> int:
    from kora.analysis.annotate import labels
    from kora.analysis.records import criteria_of

    records = judged_records(args)
    folder = Path(layout_of_args(args).annotations(args.target))
    if args.import_file:
        return import_grades(args, records, folder)
    if args.annotator is None:
        raise InputError("--annotator NAME: whose grades these are")
    if args.queue == "review":
        raise InputError(
            "--queue review is for --import; the page's queues: estimate, judges, reference, risks"
        )
    path = labels.label_file(folder, args.annotator)
    sample_id = None
    if args.queue == labels.ESTIMATE:
        if not 0 < args.width < 1:
            raise InputError(f"--width {args.width}: a share between 0 and 1 (0.05: five points)")
        keys, doc = estimate_keys(folder, records, args)
        sample_id = str(doc["id"])
        say(plan(folder, records, doc, args.width))
    else:
        from kora.analysis.annotate.queues import review

        reference = reference_records(args.reference) if args.reference else None
        keys = review(args.queue, records, args.seed, people_of(folder), reference)
        mine = labels.read(path)
        crits = criteria_of(records)
        keys = [
            k
            for k in keys
            if not all(
                c in mine.get(k, {}) and (mine[k][c].get("grade") or mine[k][c].get("notTriggered"))
                for c in crits
            )
        ]
        if not keys:
            say(f"nothing to review in the {args.queue} queue")
            return 0
    from kora.analysis.annotate.sample import SIZE

    # the estimate: the drawn sample, or its first --size; a review queue: --size of it
    offered = keys[: args.size or (len(keys) if sample_id else SIZE)]
    return serve(args, records, offered, path, sample_id)


def serve(
    args: argparse.Namespace, records: list[Any], keys: list[str], path: Path, sample: str | None
) -> int:
    from aiohttp import web

    from kora.analysis.annotate.server import build_app

    taxonomy = taxonomy_of_args(args)
    app = build_app(records, keys, path, args.annotator, args.target, taxonomy, args.queue, sample)
    say(
        f"{len(keys)} conversations of {args.target} ({args.queue}) for {args.annotator}; "
        f"labels saved to {path} on every answer. Open http://127.0.0.1:{args.port}/ "
        "(Ctrl-C stops; run the same command to go on)."
    )
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)
    return 0
