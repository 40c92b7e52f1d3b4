"""`kora compare-targets NEW BASELINE`: where two targets differ on the same tests, cell by
cell (overall, risk category, risk, age range, prompt variant; each behaviour criterion
or mechanism), failing and exemplary rates with the interval of the paired difference, the
exact McNemar test, Holm and Benjamini-Hochberg across the cells
(kora.analysis.stats.cells). Writes the comparison beside NEW's results
(results/NEW/compare-BASELINE.json, or `-o`); prints the cells that differ first.

`--fail-if-worse` makes it a gate for continuous integration: exit status 1 when NEW is
significantly worse than BASELINE in any cell after the adjustment (Holm unless `--adjust
bh`), or with `--overall` in safety's overall failing rate alone. Worse means failing
significantly more often; with `--exemplary` also exemplary significantly less often.
Exit status 0 otherwise, 2 on an error (no shared test, mixed versions, a missing target).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from kora.analysis.stats.paired import ALPHA, Adjustment
from kora.commands.common import configfile_option, force_option
from kora.errors import InputError

# where a test's grade comes from; issue 27's judge-corrected rates would be a third
# source here (see kora.analysis.stats.people)
GRADE_SOURCES = ("judge", "human")
ADJUST = {"holm": "holm", "bh": "fdr_bh"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare-targets",
        help="where two targets differ on the same scenarios (cells, adjusted); a CI gate",
        description="Compare NEW with BASELINE on the tests both ran, cell by cell: "
        "failing and exemplary rates, the paired difference with its interval, a verdict "
        "adjusted for the number of cells. With --fail-if-worse, exit status 1 when NEW "
        "is significantly worse.",
    )
    p.set_defaults(func=cmd_compare_targets)
    p.add_argument("a", help="NEW: a target name (in the config's results folder) or a folder")
    p.add_argument("b", help="BASELINE: the target to compare with")
    p.add_argument("--alpha", type=float, default=ALPHA, help="significance level (0.05)")
    p.add_argument(
        "--interval",
        choices=("newcombe", "tango"),
        default="newcombe",
        help="interval of a paired difference of proportions (default newcombe)",
    )
    p.add_argument(
        "-o",
        "--output",
        help="the comparison document's file (default: RESULTS/NEW/compare-BASELINE.json "
        "beside NEW's results; RESULTS/compare-NEW-BASELINE.json when NEW is a folder or file "
        "given by its path)",
    )
    p.add_argument("--json", action="store_true", help="print the comparison document")
    p.add_argument(
        "--grades",
        choices=GRADE_SOURCES,
        default="judge",
        help="human: people's grades (each target's annotations/) over the judge's",
    )
    gate = p.add_argument_group("gate for continuous integration")
    gate.add_argument(
        "--fail-if-worse",
        action="store_true",
        help="exit 1 when NEW is significantly worse than BASELINE in a cell",
    )
    gate.add_argument(
        "--overall", action="store_true", help="gate on safety's overall failing rate alone"
    )
    gate.add_argument(
        "--adjust", choices=tuple(ADJUST), default="holm", help="adjustment the gate uses"
    )
    gate.add_argument(
        "--exemplary",
        action="store_true",
        help="worse also means exemplary significantly less often",
    )
    force_option(p)
    configfile_option(p)


# --- output -----------------------------------------------------------------------------


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def _p(x: float) -> str:
    return "<0.0001" if x < 1e-4 else f"{x:.4f}"


def cell_label(cell: Mapping[str, Any]) -> str:
    return " ".join(str(x) for x in (cell["criterion"], cell["dimension"], cell["value"]) if x)


def verdict(o: Mapping[str, Any], a: str, b: str) -> str:
    """One outcome of a cell in words: who is worse, after which adjustment."""
    if not (o["holm"] or o["bh"]):
        return ""
    who = a if o["worse"] == "a" else b
    return f"{who} worse" + ("" if o["holm"] else " (BH only)")


def format_comparison(doc: Mapping[str, Any]) -> str:
    from kora.analysis.stats.cells import OUTCOMES, cells_that_differ_first, differs

    a, b = doc["a"], doc["b"]
    fam = doc["families"]
    conf = round(100 * doc["confidence"])
    w = max([20, *(len(cell_label(c)) for c in doc["cells"])])
    lines = [
        f"A = {a}",
        f"B = {b}",
        f"{doc['paired']} paired tests (same scenario and prompt variant); only in A "
        f"{doc['onlyA']}, only in B {doc['onlyB']}; grades: {doc['grades']}",
        f"per cell: {doc['test']}; {conf}% {doc['interval'].capitalize()} interval of A - B "
        f"(points); adjusted across the {fam['failing']['tests']} cells of each outcome: "
        f"Holm (family-wise), BH (false discovery rate); alpha {doc['alpha']}",
        "",
        f"{'cell':<{w}} {'outcome':<9} {'n':>5} {'A':>6} {'B':>6} {'A - B [' + str(conf) + '% CI]':>24}"
        f" {'p':>8} {'p Holm':>8} {'p BH':>8}  verdict",
    ]
    shown_split = False
    for cell in cells_that_differ_first(doc):
        if not shown_split and not differs(cell, "fdr_bh"):
            lines.append("-- no difference after adjustment:")
            shown_split = True
        for g in OUTCOMES:
            o = cell[g]
            ci = f"{_pts(o['diff'])} [{_pts(o['low'])}, {_pts(o['high'])}]"
            lines.append(
                f"{cell_label(cell):<{w}} {g:<9} {cell['n']:>5} {100 * o['a']['rate']:>5.1f}%"
                f" {100 * o['b']['rate']:>5.1f}% {ci:>24} {_p(o['p']):>8} {_p(o['pHolm']):>8}"
                f" {_p(o['pBH']):>8}  {verdict(o, a, b)}".rstrip()
            )
    holm = [cell_label(c) for c in doc["cells"] if differs(c, "holm")]
    bh = [cell_label(c) for c in doc["cells"] if differs(c, "fdr_bh") and not differs(c, "holm")]
    lines += [
        "",
        f"cells that differ after Holm: {', '.join(holm) or 'none'}",
        f"after Benjamini-Hochberg only: {', '.join(bh) or 'none'}",
    ]
    return "\n".join(lines)


# --- input ------------------------------------------------------------------------------


def resolve_target(name: str, results_dir: str) -> Path:
    """A path as given if it exists, else <results_dir>/<name> (a target's folder)."""
    p = Path(name)
    if p.exists():
        return p
    q = Path(results_dir) / name
    if q.exists():
        return q
    there = [f.name for f in Path(results_dir).glob("*") if f.is_dir()]
    near = "".join(f" (did you mean {n!r}?)" for n in get_close_matches(name, there, 1, 0.8))
    raise InputError(f"{name}: neither a path nor a target with results under {results_dir}/{near}")


def load_pair(
    args: argparse.Namespace, pa: Path, pb: Path
) -> tuple[list[Any], list[Any], dict[str, int] | None]:
    """NEW's and BASELINE's records, from their folders or files `pa` and `pb` (people's
    grades over the judge's with --grades human), refusing two KORA versions."""
    from kora import benchmarks
    from kora.analysis.records import benchmark_of, load_records
    from kora.analysis.stats.people import with_people_grades
    from kora.commands.common import benchmark_of_args
    from kora.commands.stats import warn_if_mock

    ra, rb = load_records([pa]), load_records([pb])
    warn_if_mock([pa, pb], "the differences below measure nothing")
    va, vb = benchmark_of(ra), benchmark_of(rb)
    if va is not vb:
        config = benchmark_of_args(args)
        name, found = (args.b, vb) if va is config else (args.a, va)
        benchmarks.check_same(found, config, f"{name} ({pa if name == args.a else pb})")
        raise InputError(f"{args.a} holds {va.describe()} results, {args.b} {vb.describe()}")
    human = None
    if args.grades == "human":
        from kora.commands.annotate import people_of  # each person's labels (none: a file)

        ra, na = with_people_grades(ra, list(people_of(pa / "annotations").values()))
        rb, nb = with_people_grades(rb, list(people_of(pb / "annotations").values()))
        human = {"a": na, "b": nb}
    return ra, rb, human


def orders(args: argparse.Namespace) -> dict[str, list[str]]:
    """Taxonomy order of categories and risks, when the config's taxonomy is at hand."""
    from kora.commands.common import taxonomy_dir, taxonomy_of_args

    out: dict[str, list[str]] = {}
    if Path(taxonomy_dir(args)).exists():
        tax = taxonomy_of_args(args)
        out["category_order"] = [c.id for c in tax.categories]
        out["risk_order"] = [r.id for c in tax.categories for r in c.risks]
    return out


# --- the gate ---------------------------------------------------------------------------


def gate(doc: Mapping[str, Any], args: argparse.Namespace) -> tuple[int, list[str]]:
    """(exit status, lines): 1 and the cells where NEW is significantly worse, else 0."""
    from kora.analysis.stats.cells import Outcome, worse_cells

    adjustment: Adjustment = ADJUST[args.adjust]  # type: ignore[assignment]
    outcomes: tuple[Outcome, ...] = ("failing", "exemplary") if args.exemplary else ("failing",)
    worse = worse_cells(doc, adjustment=adjustment, outcomes=outcomes, overall=args.overall)
    how = (
        f"safety's overall failing rate, alpha {doc['alpha']}"
        if args.overall
        else f"any cell after {'Holm' if args.adjust == 'holm' else 'Benjamini-Hochberg'}"
        f" across {doc['families']['failing']['tests']} cells, alpha {doc['alpha']}"
    )
    if not worse:
        return 0, [f"gate: {doc['a']} is not significantly worse than {doc['b']} ({how})"]
    lines = [f"gate: {doc['a']} is significantly worse than {doc['b']} ({how}):"]
    for cell, g in worse:
        o = cell[g]
        what = "fails more often" if g == "failing" else "is exemplary less often"
        lines.append(
            f"  {cell_label(cell)}: {what}, {100 * o['a']['rate']:.1f}% vs "
            f"{100 * o['b']['rate']:.1f}% ({_pts(o['diff'])} points "
            f"[{_pts(o['low'])}, {_pts(o['high'])}]), p {_p(o['p'])}, Holm {_p(o['pHolm'])}, "
            f"BH {_p(o['pBH'])}"
        )
    return 1, lines


def run_comparison(args: argparse.Namespace, pa: Path, pb: Path) -> dict[str, Any]:
    from kora.analysis.stats.cells import compare_cells

    ra, rb, human = load_pair(args, pa, pb)
    order = orders(args)
    doc = compare_cells(
        ra,
        rb,
        str(args.a),
        str(args.b),
        alpha=float(args.alpha),
        interval=args.interval,
        human=human,
        category_order=order.get("category_order"),
        risk_order=order.get("risk_order"),
    )
    if not doc["paired"]:
        raise InputError(f"{args.a} and {args.b} share no test (same scenario id and prompt)")
    return doc


def _short(given: str) -> str:
    """A target's name, or a folder's or file's name without its suffix."""
    path = Path(given.rstrip("/") or given)
    return path.stem if path.suffix in (".json", ".jsonl", ".zip") else path.name


def default_output(args: argparse.Namespace, results: Path, new: Path) -> Path:
    """Where the comparison goes unless -o says: beside NEW's results (`new`) when NEW is
    a target of the results folder, else in the results folder itself; never in the
    folder of per-test files given (it would be read as one of them next time)."""
    name = f"compare-{_short(args.b)}.json"
    if new.is_dir() and new.resolve().parent == results.resolve() and (new / "judgments").is_dir():
        return new / name
    return results / f"compare-{_short(args.a)}-{_short(args.b)}.json"


def made_differently(folders: dict[str, Path]) -> list[str]:
    """How the two results' making differs (benchmark version, templates, judges), from
    the manifests beside them (kora.analysis.manifest.differences)."""
    from kora.analysis.manifest import differences
    from kora.benchmarks.layout import MANIFEST
    from kora.io import read_object

    return differences(
        {n: read_object(f / MANIFEST) if f.is_dir() else None for n, f in folders.items()}
    )


def cmd_compare_targets(args: argparse.Namespace) -> int:
    """`kora compare-targets NEW BASELINE`: the comparison, its document, and with
    --fail-if-worse the gate's exit status."""
    from kora.commands.common import layout_of_args
    from kora.commands.stats import print_json
    from kora.io import refuse_to_replace, remember_written, write_json

    if args.output:  # the default, beside NEW's results, is kora's own
        refuse_to_replace([Path(args.output)], args.force)
    if not 0 < args.alpha < 1:
        raise InputError(f"--alpha must be between 0 and 1, got {args.alpha}")
    results = layout_of_args(args).results
    pa, pb = resolve_target(args.a, results), resolve_target(args.b, results)
    doc = run_comparison(args, pa, pb)
    # what made the two results, where it differs: said before any figure
    doc = {"differences": made_differently({str(args.a): pa, str(args.b): pb}), **doc}
    output = Path(args.output) if args.output else default_output(args, Path(results), pa)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_json(output, doc)
    remember_written([output] if args.output else [])
    if args.json:
        print_json(doc)
    else:
        for line in doc["differences"]:
            print(f"NOTE: {line}")
        print(format_comparison(doc))
        print(f"comparison: {output}")
    if not args.fail_if_worse:
        return 0
    code, lines = gate(doc, args)
    print("\n".join(lines), file=sys.stderr if args.json else sys.stdout)
    return code
