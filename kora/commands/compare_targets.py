"""`kora compare-targets A B`: two targets on the same tests, failing or not: the exact
McNemar test overall and per risk, Holm-adjusted."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kora.analysis.records import load_records
from kora.analysis.stats.analyses import compare_targets
from kora.analysis.stats.paired import ALPHA, verdict
from kora.analysis.stats.rates import pct
from kora.commands.stats import print_json
from kora.errors import InputError


def register(sub: Any) -> None:
    ct = sub.add_parser(
        "compare-targets", help="paired comparison of two targets on the same scenarios"
    )
    add_compare_targets_arguments(ct)
    ct.set_defaults(func=cmd_compare_targets)


def add_compare_targets_arguments(p: Any) -> None:
    p.add_argument("a", help="target name (results/<name>) or a judgments folder / file")
    p.add_argument("b", help="the other target")
    p.add_argument("--alpha", type=float, default=ALPHA, help="significance level (0.05)")
    p.add_argument("--results-dir", default="results", help="where target folders live")
    p.add_argument("--json", action="store_true", help="machine-readable output")


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


def resolve_target(name: str, results_dir: str = "results") -> Path:
    """A path as given if it exists, else results/<name> (a target's folder)."""
    p = Path(name)
    if p.exists():
        return p
    q = Path(results_dir) / name
    if q.exists():
        return q
    raise InputError(f"{name}: neither a path nor a target with results under {results_dir}/")


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
        print_json(doc)
    else:
        print(format_compare_targets(doc, str(args.a), str(args.b)))
    return 0
