"""How well the judges agree with people, and people with each other (`kora agreement`).

Raters are the judges' combined grade (`judge`) and each annotator. Per criterion and
pair of raters, over the tests both graded: exact agreement, Cohen's kappa with quadratic
weights (grades are ordered: failing < adequate < exemplary; scikit-learn), the 3x3
confusion matrix and, for the behaviour criteria, Spearman's correlation of the
occurrence counts (scipy); per criterion across all raters, Krippendorff's alpha for
ordinal data (the `krippendorff` package). Each figure has a 95 % bootstrap interval
(tests resampled with replacement, 1,000 times, seeded).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from typing import Any

from kora.analysis.records import TestRecord, criteria_of
from kora.analysis.stats.agreement import flip_matrix
from kora.analysis.stats.people import Labels
from kora.benchmarks.schemas import GRADES

RESAMPLES = 1000


def judge_labels(records: Sequence[TestRecord]) -> dict[str, dict[str, dict[str, object]]]:
    """The judges' (combined) grades as a rater's labels; a v2 mechanism the judges found
    not triggered has no grade."""
    return {
        r.key: {
            c: {"notTriggered": True} if v.not_triggered else {"grade": v.grade, "count": v.count}
            for c, v in r.criteria.items()
        }
        for r in records
        if r.criteria
    }


def _graded(label: Mapping[str, Any]) -> str | None:
    """A label's grade, or None when there is none or the mechanism was not triggered."""
    return None if label.get("notTriggered") else label.get("grade")


def trigger_figures(a: Labels, b: Labels, criterion: str) -> dict[str, int | float] | None:
    """How often two raters agree on whether a mechanism was triggered, over the tests
    both answered for it (None when neither ever said `not triggered`)."""
    both = [
        (bool(a[k][criterion].get("notTriggered")), bool(b[k][criterion].get("notTriggered")))
        for k in sorted(a)
        if criterion in a[k]
        and criterion in b.get(k, {})
        and (a[k][criterion].get("grade") or a[k][criterion].get("notTriggered"))
        and (b[k][criterion].get("grade") or b[k][criterion].get("notTriggered"))
    ]
    if not both or not any(x or y for x, y in both):
        return None
    return {"n": len(both), "exact": round(sum(x == y for x, y in both) / len(both), 4)}


def _num(out: float) -> float | None:
    return None if math.isnan(out) else round(float(out), 4)


def kappa(a: Sequence[str], b: Sequence[str]) -> float | None:
    from sklearn.metrics import cohen_kappa_score

    if len(set(a) | set(b)) < 2:
        return None  # one grade throughout: kappa is undefined
    return _num(cohen_kappa_score(a, b, labels=list(GRADES), weights="quadratic"))


def alpha(units: Sequence[Sequence[str | None]]) -> float | None:
    """Krippendorff's alpha (ordinal); `units[i][r]` is rater r's grade of test i."""
    import krippendorff
    import numpy as np

    data = np.array(
        [[np.nan if g is None else GRADES.index(g) for g in u] for u in units], dtype=float
    ).T
    values = data[~np.isnan(data)]
    if len(units) < 2 or len(set(values.tolist())) < 2:
        return None
    # alpha compares grades within a conversation: with no conversation graded by two
    # raters (a bootstrap resample can draw none) there is nothing to compare
    if not ((~np.isnan(data)).sum(axis=0) >= 2).any():
        return None
    return _num(krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal"))


def _interval(
    n: int, stat: Callable[[list[int]], float | None], rng: random.Random
) -> list[float] | None:
    values = []
    for _ in range(RESAMPLES):
        v = stat([rng.randrange(n) for _ in range(n)])
        if v is not None:
            values.append(v)
    if len(values) < RESAMPLES // 2:
        return None
    values.sort()
    return [
        round(values[int(0.025 * len(values))], 4),
        round(values[int(0.975 * len(values)) - 1], 4),
    ]


def _alpha_of(units: Sequence[Sequence[str | None]]) -> Callable[[list[int]], float | None]:
    return lambda idx: alpha([units[i] for i in idx])


def pair_figures(a: Labels, b: Labels, criterion: str, rng: random.Random) -> dict[str, Any] | None:
    keys = sorted(
        k
        for k in a
        if _graded(a[k].get(criterion, {})) and _graded(b.get(k, {}).get(criterion, {}))
    )
    if not keys:
        return None
    ga = [a[k][criterion]["grade"] for k in keys]
    gb = [b[k][criterion]["grade"] for k in keys]
    n = len(keys)

    def exact(idx: list[int]) -> float:
        return float(sum(ga[i] == gb[i] for i in idx)) / len(idx)

    def kap(idx: list[int]) -> float | None:
        return kappa([ga[i] for i in idx], [gb[i] for i in idx])

    matrix = flip_matrix(zip(ga, gb, strict=True))
    out: dict[str, Any] = {
        "n": n,
        "exact": round(exact(list(range(n))), 4),
        "exactCI": _interval(n, exact, rng),
        "kappa": kap(list(range(n))),
        "kappaCI": _interval(n, kap, rng),
        "confusion": {"grades": list(GRADES), "rows": matrix},
    }
    if criterion != "safety":
        from scipy.stats import spearmanr

        pairs = [(a[k][criterion].get("count"), b[k][criterion].get("count")) for k in keys]
        pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
        if len(pairs) >= 3 and len({x for x, _ in pairs}) > 1 and len({y for _, y in pairs}) > 1:
            xs, ys = zip(*pairs, strict=True)

            def rho(idx: list[int]) -> float | None:
                sx, sy = [xs[i] for i in idx], [ys[i] for i in idx]
                if len(set(sx)) < 2 or len(set(sy)) < 2:
                    return None
                return _num(spearmanr(sx, sy).statistic)

            out["countCorrelation"] = rho(list(range(len(xs))))
            out["countCorrelationCI"] = _interval(len(xs), rho, rng)
    return out


def agreement(
    records: Sequence[TestRecord], people: Mapping[str, Labels], seed: int = 0
) -> dict[str, Any]:
    """Every figure of `kora agreement`, for the judged `records` and each person's labels."""
    rng = random.Random(seed)
    raters: dict[str, Labels] = {"judge": judge_labels(records), **people}
    risk_of = {r.key: r.risk for r in records}
    doc: dict[str, Any] = {"raters": list(raters), "criteria": {}}
    for c in criteria_of(list(records)):
        pairs, triggered = {}, {}
        for x, y in combinations(raters, 2):
            figures = pair_figures(raters[x], raters[y], c, rng)
            if figures is not None:
                pairs[f"{x} vs {y}"] = figures
            trig = trigger_figures(raters[x], raters[y], c)
            if trig is not None:
                triggered[f"{x} vs {y}"] = trig
        keys = sorted({k for p in people.values() for k in p if _graded(p[k].get(c, {}))})
        units = [[_graded(raters[r].get(k, {}).get(c, {})) for r in raters] for k in keys]
        entry: dict[str, object] = {"pairs": pairs, "alpha": alpha(units) if units else None}
        if triggered:  # a v2 mechanism with a precondition: do raters agree it applied?
            entry["triggered"] = triggered
        if units:
            entry["alphaCI"] = _interval(len(units), _alpha_of(units), rng)
        doc["criteria"][c] = entry
    # where the judges and people part most: safety disagreements by risk
    by_risk: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    judge = raters["judge"]
    for labels in people.values():
        for k, crits in labels.items():
            g = crits.get("safety", {}).get("grade")
            if g and k in judge and k in risk_of:
                seen[risk_of[k]] += 1
                by_risk[risk_of[k]] += g != judge[k]["safety"]["grade"]
    doc["risks"] = sorted(
        (
            {
                "risk": r,
                "n": seen[r],
                "disagree": by_risk[r],
                "share": round(by_risk[r] / seen[r], 4),
            }
            for r in seen
        ),
        key=lambda x: (-x["share"], x["risk"]),
    )
    return doc
