"""The `kora stats`, `kora compare` and `kora compare-targets` commands: arguments, the
records they read, and their text or JSON output. Wired into `kora.commands.main`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from kora.analysis.records import CRITERION_LABELS, TestRecord, judged, load_records
from kora.analysis.stats.agreement import kappa_label
from kora.analysis.stats.analyses import (
    compare_judgments,
    compare_targets,
    criteria_of,
    criterion_summary,
)
from kora.analysis.stats.paired import ALPHA, verdict
from kora.analysis.stats.rates import NO_SIGNAL_SHARE, no_signal, pct
from kora.benchmarks.schemas import GRADES
from kora.errors import InputError

# --- output -----------------------------------------------------------------------------


def _fmt(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _label(c: str) -> str:
    return CRITERION_LABELS.get(c, c)


def format_stats(
    records: Sequence[TestRecord],
    threshold: float = NO_SIGNAL_SHARE,
    criteria: Sequence[str] | None = None,
) -> str:
    """Each criterion's grade distribution and mean occurrence count; NO SIGNAL flags."""
    ok = judged(records)
    crits = list(criteria) if criteria else criteria_of(ok)
    lines = [
        f"{len(ok)} judged tests"
        + (f" ({len(records) - len(ok)} failed)" if len(ok) < len(records) else "")
    ]
    lines.append(
        f"{'criterion':<20} {'n':>6}  {'failing':>15}  {'adequate':>15}  {'exemplary':>15}  {'mean count':>10}"
    )
    for c in crits:
        s = criterion_summary([r.criteria[c] for r in ok if c in r.criteria])
        n = s["n"]
        cells = [
            f"{s['counts'][g]:>6} ({pct(s['counts'][g] / n if n else None):>6})" for g in GRADES
        ]
        mean = _fmt(s.get("meanOccurrences"), 2)
        flag = "  NO SIGNAL" if no_signal(s["counts"], threshold) else ""
        extra = f"  ({s['notTriggered']} not triggered)" if s.get("notTriggered") else ""
        lines.append(f"{c:<20} {n:>6}  " + "  ".join(cells) + f"  {mean:>10}{flag}{extra}")
    return "\n".join(lines)


def stats_document(
    records: Sequence[TestRecord],
    threshold: float = NO_SIGNAL_SHARE,
    criteria: Sequence[str] | None = None,
) -> dict[str, Any]:
    ok = judged(records)
    crits = list(criteria) if criteria else criteria_of(ok)
    out: dict[str, Any] = {"tests": len(records), "judged": len(ok), "criteria": {}}
    for c in crits:
        s = criterion_summary([r.criteria[c] for r in ok if c in r.criteria])
        s["noSignal"] = no_signal(s["counts"], threshold)
        out["criteria"][c] = s
    return out


def _by_judge(records: Sequence[TestRecord]) -> dict[str, list[TestRecord]]:
    """Each judge's own verdicts, as records of their own."""
    out: dict[str, list[TestRecord]] = {}
    for r in judged(records):
        for j in r.judges:
            out.setdefault(j.judge, []).append(
                TestRecord(r.key, r.category, r.risk, r.age, r.scenario_id, r.prompt, j.criteria)
            )
    return out


def format_matrix(m: Sequence[Sequence[int]], a: str = "A", b: str = "B") -> str:
    w = max(9, *(len(str(x)) for row in m for x in row))
    corner = a + " \\ " + b
    head = f"{corner:<14}" + "".join(f"{g:>{w + 1}}" for g in GRADES)
    rows = [
        f"{g:<14}" + "".join(f"{x:>{w + 1}}" for x in row) for g, row in zip(GRADES, m, strict=True)
    ]
    return "\n".join([head, *rows])


def format_compare(doc: Mapping[str, Any], a: str, b: str) -> str:
    lines = [
        f"A = {a}",
        f"B = {b}",
        f"matched {doc['matched']} tests by key; only in A {doc['onlyA']}, only in B {doc['onlyB']}",
    ]
    for c, s in doc["criteria"].items():
        agree = pct(s["agreement"])
        flips = s["n"] - sum(s["matrix"][i][i] for i in range(3))
        lines += [
            "",
            f"{_label(c)} ({c}): n {s['n']}, agreement {agree}, {flips} flipped, "
            f"Cohen's kappa {_fmt(s['cohenKappa'])} ({kappa_label(s['cohenKappa'])})",
            format_matrix(s["matrix"]),
        ]
    return "\n".join(lines)


def format_compare_targets(doc: Mapping[str, Any], a: str, b: str) -> str:
    o = doc["overall"]
    alpha = doc["alpha"]

    def line(label: str, d: Mapping[str, Any], p_key: str = "p") -> str:
        ra, rb = d["aFailing"], d["bFailing"]
        sig = "SIGNIFICANT" if d["significant"] else "n.s."
        diff = "–" if d["diff"] is None else f"{100 * d['diff']:+.1f} pts"
        return (
            f"{label:<44} {d['n']:>5}  {pct(ra['rate']):>7} vs {pct(rb['rate']):<7} {diff:>11}"
            f"  A-only {d['aOnly']:>4}  B-only {d['bOnly']:>4}  p={d[p_key]:.4g}  {sig}"
        )

    lines = [
        f"A = {a}",
        f"B = {b}",
        f"safety failing rate on paired tests (same scenario and prompt); {doc['method']}; alpha {alpha}",
        f"unpaired: only in A {doc['onlyA']}, only in B {doc['onlyB']}",
        "",
        f"{'group':<44} {'n':>5}  {'A':>7}    {'B':<7} {'A - B':>11}",
        line("overall", o),
    ]
    lines += [line(r["riskId"], r, "pHolm") for r in doc["risks"]]
    sig = [r["riskId"] for r in doc["risks"] if r["significant"]]
    lines += [
        "",
        f"overall: {verdict(o, a, b)}",
        f"risks with a significant difference: {', '.join(sig) or 'none'}",
    ]
    return "\n".join(lines)


def _print_json(obj: Any) -> None:
    print(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())


# --- arguments and commands -------------------------------------------------------------


def resolve_target(name: str, results_dir: str = "results") -> Path:
    """A path as given if it exists, else results/<name> (a target's folder)."""
    p = Path(name)
    if p.exists():
        return p
    q = Path(results_dir) / name
    if q.exists():
        return q
    raise InputError(f"{name}: neither a path nor a target with results under {results_dir}/")


def add_stats_arguments(p: Any) -> None:
    p.add_argument(
        "paths", nargs="+", help="judgment JSONL / per-test JSON: folders, files or .zip"
    )
    p.add_argument(
        "--criteria", nargs="+", help="only these criteria (safety, anthropomorphism, ...)"
    )
    p.add_argument("--by-judge", action="store_true", help="also each judge's own verdicts")
    p.add_argument(
        "--threshold", type=float, default=NO_SIGNAL_SHARE, help="NO SIGNAL share (0.95)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def add_compare_arguments(p: Any) -> None:
    p.add_argument("a", help="judgment set A: folder, .zip or JSON/JSONL file(s)")
    p.add_argument("b", help="judgment set B, joined to A by test key")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def add_compare_targets_arguments(p: Any) -> None:
    p.add_argument("a", help="target name (results/<name>) or a judgments folder / file")
    p.add_argument("b", help="the other target")
    p.add_argument("--alpha", type=float, default=ALPHA, help="significance level (0.05)")
    p.add_argument("--results-dir", default="results", help="where target folders live")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_stats(args: Any) -> int:
    """`kora stats PATH...`: grade distribution and mean count per criterion, NO SIGNAL flags."""
    threshold = float(getattr(args, "threshold", NO_SIGNAL_SHARE))
    criteria = getattr(args, "criteria", None)
    paths = getattr(args, "paths", None) or [args.path]
    records = load_records(paths)
    if not records:
        raise InputError(f"{', '.join(map(str, paths))}: no judged tests found")
    if getattr(args, "json", False):
        doc = stats_document(records, threshold, criteria)
        if getattr(args, "by_judge", False):
            doc["judges"] = {
                j: stats_document(rs, threshold, criteria) for j, rs in _by_judge(records).items()
            }
        _print_json(doc)
        return 0
    print(format_stats(records, threshold, criteria))
    if getattr(args, "by_judge", False):
        for j, rs in _by_judge(records).items():
            print(f"\njudge {j}:")
            print(format_stats(rs, threshold, criteria))
    return 0


def cmd_compare(args: Any) -> int:
    """`kora compare A B`: two judgment sets joined by test key, agreement and flip matrices."""
    a, b = load_records([args.a]), load_records([args.b])
    doc = compare_judgments(a, b)
    if not doc["matched"]:
        raise InputError(
            f"no test key is in both {args.a} ({len(a)} tests) and {args.b} ({len(b)} tests)"
        )
    if getattr(args, "json", False):
        _print_json(doc)
    else:
        print(format_compare(doc, str(args.a), str(args.b)))
    return 0


def cmd_compare_targets(args: Any) -> int:
    """`kora compare-targets A B`: paired exact McNemar on safety failures, overall and per risk."""
    results_dir = getattr(args, "results_dir", "results")
    pa, pb = resolve_target(args.a, results_dir), resolve_target(args.b, results_dir)
    doc = compare_targets(
        load_records([pa]), load_records([pb]), float(getattr(args, "alpha", ALPHA))
    )
    if not doc["overall"]["n"]:
        raise InputError(f"{args.a} and {args.b} share no test (same scenario id and prompt)")
    if getattr(args, "json", False):
        _print_json(doc)
    else:
        print(format_compare_targets(doc, str(args.a), str(args.b)))
    return 0
