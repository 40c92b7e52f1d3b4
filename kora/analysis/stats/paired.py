"""Two targets (or two prompt variants) on the same tests, failing or not: the exact
McNemar test, i.e. a two-sided sign test on the discordant pairs, and the adjustment of
many such tests at once (Holm, Benjamini-Hochberg, as statsmodels computes them). Pure
functions.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np

from kora.analysis.stats.rates import Rate

ALPHA = 0.05

K = TypeVar("K", bound=Hashable)


def sign_test(b: int, c: int) -> float:
    """Exact two-sided sign test (exact McNemar) on b vs c discordant pairs: scipy.stats'
    `binomtest(min(b, c), b + c, 0.5)`, step for step on the same binomial functions, so
    its p-values to the last bit, without the 46 MB that importing scipy.stats costs
    the report job (tests/test_compare_stats.py compares the two)."""
    if b + c == 0 or b == c:
        return 1.0
    from scipy.special._ufuncs import _binom_cdf, _binom_pmf, _binom_sf

    k, n = min(b, c), b + c
    d = _binom_pmf(k, n, 0.5) * (1 + 1e-7)
    # the first count above the mode as unlikely as k or less: a binary search, as scipy's
    lo, hi = math.ceil(n / 2), n
    while lo < hi:
        mid = lo + (hi - lo) // 2
        at = _binom_pmf(mid, n, 0.5)
        if at > d:
            lo = mid + 1
        elif at < d:
            hi = mid - 1
        else:
            lo = hi = mid
    first = lo if _binom_pmf(lo, n, 0.5) >= d else lo - 1
    beyond = n - first + int(d == _binom_pmf(first, n, 0.5))  # counts that far out
    return min(1.0, float(_binom_cdf(k, n, 0.5) + _binom_sf(n - beyond, n, 0.5)))


Adjustment = Literal["holm", "fdr_bh"]
"""`holm`: Holm's step-down adjustment, controls the family-wise error rate (the chance of
any false "significant"). `fdr_bh`: Benjamini-Hochberg, controls the false discovery
rate (the expected share of false ones among the "significant"); more lenient."""


@dataclass(frozen=True)
class Adjusted:
    """Adjusted p-values and verdicts, in the order the p-values were given.

    `reject[i]` is `p[i] <= alpha`, as statsmodels decides it (note `<=`, where
    `Paired.significant` compares an unadjusted p with `<`).
    """

    p: list[float]
    reject: list[bool]
    method: Adjustment
    alpha: float


def adjust_pvalues(
    pvalues: Sequence[float], method: Adjustment = "holm", alpha: float = ALPHA
) -> Adjusted:
    """Adjust p-values for testing many hypotheses at once (statsmodels' `multipletests`).

    Raises ValueError for a p-value outside [0, 1] (or NaN) or an unknown method (`alpha`
    as `kora compare-targets` checks it).
    """
    if method not in ("holm", "fdr_bh"):
        raise ValueError(f"adjust_pvalues: method must be 'holm' or 'fdr_bh', got {method!r}")
    ps = [float(p) for p in pvalues]
    bad = [p for p in ps if not 0 <= p <= 1]  # NaN fails both comparisons
    if bad:
        raise ValueError(f"adjust_pvalues: p-values must be in [0, 1], got {bad[0]}")
    # statsmodels' `multipletests`, step for step (tests/test_compare_cells.py holds them
    # equal): importing statsmodels, with pandas and scipy.stats, took 164 MB, most of
    # what the report job held (issue 62)
    order = np.argsort(ps)
    ranked = np.asarray(ps)[order]
    m = len(ranked)
    if method == "holm":
        left = np.arange(m, 0, -1)
        kept = np.nonzero(ranked > alpha / left)[0]  # the first not rejected stops the steps
        reject = np.arange(m) < (kept[0] if kept.size else m)
        adjusted = np.maximum.accumulate(ranked * left)
    else:
        share = np.arange(1, m + 1) / float(m)
        below = np.nonzero(ranked <= share * alpha)[0]  # all up to the last one below
        reject = np.arange(m) <= (below[-1] if below.size else -1)
        adjusted = np.minimum.accumulate((ranked / share)[::-1])[::-1]
    back = np.argsort(order)  # each p-value's place among the sorted ones
    adjusted, reject = np.minimum(adjusted, 1)[back], reject[back]
    return Adjusted([float(p) for p in adjusted], [bool(r) for r in reject], method, alpha)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (same order as given)."""
    return adjust_pvalues(pvalues, "holm").p


@dataclass(frozen=True)
class Paired:
    """Failing-or-not of A and B on the same n tests.

    `a_only`: tests A fails and B does not; `b_only`: the reverse. The exact McNemar test
    asks whether those two counts differ by more than chance.
    """

    n: int
    a_failing: int
    b_failing: int
    a_only: int
    b_only: int
    p: float

    @property
    def diff(self) -> float | None:
        """A's failing rate minus B's, on the paired tests."""
        return (self.a_failing - self.b_failing) / self.n if self.n else None

    def significant(self, alpha: float = ALPHA) -> bool:
        return self.p < alpha

    def as_dict(self) -> dict[str, Any]:
        d = self.diff
        return {
            "n": self.n,
            "aFailing": Rate(self.a_failing, self.n).as_dict(),
            "bFailing": Rate(self.b_failing, self.n).as_dict(),
            "aOnly": self.a_only,
            "bOnly": self.b_only,
            "diff": None if d is None else round(d, 6),
            "p": self.p,
        }


def paired_test(a: Mapping[K, bool], b: Mapping[K, bool]) -> Paired:
    """Exact McNemar test of failing (True) vs not, on the keys A and B share."""
    keys = a.keys() & b.keys()
    a_only = sum(1 for k in keys if a[k] and not b[k])
    b_only = sum(1 for k in keys if b[k] and not a[k])
    return Paired(
        n=len(keys),
        a_failing=sum(1 for k in keys if a[k]),
        b_failing=sum(1 for k in keys if b[k]),
        a_only=a_only,
        b_only=b_only,
        p=sign_test(a_only, b_only),
    )


def verdict(row: Mapping[str, Any], a: str, b: str) -> str:
    """The outcome of one paired comparison (a row of `paired_comparison`) in words.

    The one wording of it: the report, the leaderboard and `kora compare-targets` all
    say it this way.
    """
    if not row["n"]:
        return "no paired tests"
    if not row["significant"]:
        return "no significant difference"
    worse = a if row["aFailing"]["k"] > row["bFailing"]["k"] else b
    return f"{worse} fails significantly more often"
