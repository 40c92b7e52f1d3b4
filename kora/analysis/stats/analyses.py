"""What the report, the leaderboard and the commands compute from test records: grade
summaries with intervals, judge agreement, and paired comparisons of two targets or of
the two prompt variants.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from kora.analysis.records import CRITERIA, Criterion, TestRecord, benchmark_of, judged
from kora.analysis.stats.agreement import (
    cohen_kappa,
    fleiss_kappa,
    flip_matrix,
    matrix_agreement,
    percent_agreement,
    ratings_table,
    unanimous_share,
)
from kora.analysis.stats.paired import ALPHA, holm, paired_test
from kora.analysis.stats.rates import Rate, grade_counts, no_signal
from kora.benchmarks.schemas import GRADES


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


# --- summaries --------------------------------------------------------------------------


def criterion_summary(items: Sequence[Criterion]) -> dict[str, Any]:
    """n, grade counts and shares, failing / exemplary rates with CIs, mean count, signal."""
    triggered = [c for c in items if not c.not_triggered]
    counts = grade_counts(c.grade for c in triggered)
    n = len(triggered)
    out: dict[str, Any] = {
        "n": n,
        "counts": counts,
        "failing": Rate(counts["failing"], n).as_dict(),
        "adequate": Rate(counts["adequate"], n).as_dict(),
        "exemplary": Rate(counts["exemplary"], n).as_dict(),
    }
    occ = [c.count for c in triggered if c.count is not None]
    if occ:
        out["meanOccurrences"] = round(sum(occ) / len(occ), 4)
    if len(triggered) < len(items):
        # a mechanism whose precondition was not met: n and the rates count the rest only
        out["triggered"] = n
        out["notTriggered"] = len(items) - len(triggered)
    out["noSignal"] = no_signal(counts)
    return out


def group_summary(
    records: Sequence[TestRecord], criteria: Sequence[str] = CRITERIA
) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(records)}
    for c in criteria:
        out[c] = criterion_summary([r.criteria[c] for r in records if c in r.criteria])
    return out


def criteria_of(records: Iterable[TestRecord]) -> list[str]:
    """The criteria present: safety first, then those of the records' version in its
    order; anything else after, sorted."""
    records = list(records)
    seen: dict[str, None] = {}
    for r in records:
        for c in r.criteria:
            seen.setdefault(c, None)
    order = ("safety", *benchmark_of(records).criteria)
    first = [c for c in order if c in seen]
    return first + sorted(c for c in seen if c not in first)


# --- agreement --------------------------------------------------------------------------


def judge_agreement(
    records: Sequence[TestRecord], criteria: Sequence[str] = CRITERIA
) -> dict[str, Any] | None:
    """Per criterion: percent agreement, unanimity and Fleiss' kappa across the judges.

    Uses the tests graded by the most common number of judges (>= 2); None with one judge.
    """
    sizes = Counter(len(r.judges) for r in records if len(r.judges) >= 2)
    if not sizes:
        return None
    raters = sizes.most_common(1)[0][0]
    rs = [r for r in records if len(r.judges) == raters]
    names = [j.judge for j in rs[0].judges]
    out: dict[str, Any] = {"judges": names, "raters": raters, "tests": len(rs), "criteria": {}}
    for c in criteria:
        ratings = [
            [j.criteria[c].grade for j in r.judges]
            for r in rs
            if all(c in j.criteria and not j.criteria[c].not_triggered for j in r.judges)
        ]
        table = ratings_table(ratings)
        per_judge = {
            name: grade_counts(
                r.judges[i].criteria[c].grade for r in rs if c in r.judges[i].criteria
            )
            for i, name in enumerate(names)
        }
        out["criteria"][c] = {
            "n": len(table),
            "percentAgreement": _round(percent_agreement(table)),
            "unanimous": _round(unanimous_share(table)),
            "fleissKappa": _round(fleiss_kappa(table)),
            "perJudge": per_judge,
        }
    return out


def compare_judgments(a: Sequence[TestRecord], b: Sequence[TestRecord]) -> dict[str, Any]:
    """Join two judgment sets by test key: agreement, Cohen's kappa, flip matrix per criterion."""
    ja = {r.key: r for r in judged(a)}
    jb = {r.key: r for r in judged(b)}
    shared = [k for k in ja if k in jb]
    crits = [
        c for c in criteria_of(ja[k] for k in shared) if all(c in jb[k].criteria for k in shared)
    ]
    out: dict[str, Any] = {
        "matched": len(shared),
        "onlyA": len(ja.keys() - jb.keys()),
        "onlyB": len(jb.keys() - ja.keys()),
        "criteria": {},
    }
    for c in crits:
        pairs = [
            (ja[k].criteria[c].grade, jb[k].criteria[c].grade)
            for k in shared
            if c in ja[k].criteria
            and not ja[k].criteria[c].not_triggered
            and not jb[k].criteria[c].not_triggered
        ]
        m = flip_matrix(pairs)
        out["criteria"][c] = {
            "n": len(pairs),
            "agreement": _round(matrix_agreement(m)),
            "cohenKappa": _round(cohen_kappa(m)),
            "matrix": m,
            "aCounts": dict(zip(GRADES, (sum(r) for r in m), strict=True)),
            "bCounts": dict(
                zip(GRADES, (sum(m[i][j] for i in range(3)) for j in range(3)), strict=True)
            ),
        }
    return out


# --- paired comparisons -----------------------------------------------------------------


def paired_comparison(
    a: Sequence[TestRecord],
    b: Sequence[TestRecord],
    key: Callable[[TestRecord], Hashable],
) -> dict[str, Any]:
    """Safety failing-or-not of A and B on the tests matched by `key`, overall and per risk.

    Overall: exact McNemar. Per risk: the same, with Holm-adjusted p-values across the
    risks (significant = adjusted p < ALPHA), so a long table does not cry wolf.
    """
    fa = {key(r): r for r in judged(a)}
    fb = {key(r): r for r in judged(b)}
    overall = paired_test(
        {k: r.failing for k, r in fa.items()}, {k: r.failing for k, r in fb.items()}
    )
    risks: dict[str, str] = {}
    for k, r in fa.items():
        if k in fb:
            risks.setdefault(r.risk, r.category)
    tests = [
        paired_test(
            {k: r.failing for k, r in fa.items() if r.risk == risk},
            {k: r.failing for k, r in fb.items() if r.risk == risk},
        )
        for risk in risks
    ]
    adjusted = holm([t.p for t in tests])
    per = [
        {
            "riskCategoryId": category,
            "riskId": risk,
            **t.as_dict(),
            "pHolm": adj,
            "significant": adj < ALPHA,
        }
        for (risk, category), t, adj in zip(risks.items(), tests, adjusted, strict=True)
    ]
    return {
        "alpha": ALPHA,
        "method": "exact McNemar (two-sided sign test on discordant pairs); per risk Holm-adjusted",
        "onlyA": len(fa.keys() - fb.keys()),
        "onlyB": len(fb.keys() - fa.keys()),
        "overall": {**overall.as_dict(), "significant": overall.significant(ALPHA)},
        "risks": per,
    }


def compare_prompts(records: Sequence[TestRecord]) -> dict[str, Any] | None:
    """`default` (A) vs `child` (B) on the scenarios run with both; None without both."""
    ok = judged(records)
    default = [r for r in ok if r.prompt == "default"]
    child = [r for r in ok if r.prompt == "child"]
    if not default or not child:
        return None
    return paired_comparison(default, child, lambda r: r.scenario_id)
