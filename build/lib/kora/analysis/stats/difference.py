"""A 95 % confidence interval for the difference of two failing rates measured on the same
tests (A's rate minus B's), from the paired 2x2 table. Pure functions.

The table, with "failing" as the event:

                 B failing   B not
    A failing    both        a_only
    A not        b_only      neither

The difference is (a_only - b_only) / n: the pairs where both fail or neither fails tell
nothing about it, though they narrow the interval. Two intervals:

- `newcombe`: Newcombe's hybrid score interval for paired data (Newcombe 1998, Statistics
  in Medicine 17:2635, "method 10"): the Wilson intervals of the two rates, combined
  square-and-add with the correlation of the two rates, the correlation estimate
  corrected towards 0 by n/2 when positive. Closed form.
- `tango`: Tango's score interval (Tango 1998, Statistics in Medicine 17:891): the
  differences the score test does not reject, with the nuisance parameter at its
  restricted maximum likelihood. It excludes 0 exactly when McNemar's (uncorrected,
  asymptotic) chi-square test rejects at the same level.

Both stay within [-1, 1] and behave at 0 and n, unlike the Wald interval.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

from kora.analysis.stats.rates import two_sided_z, wilson

CONFIDENCE = 0.95

Method = Literal["newcombe", "tango"]


class PairedDiff(NamedTuple):
    """A's failing rate minus B's on the same tests, with its confidence interval."""

    diff: float
    low: float
    high: float


def _checked(
    both: int, a_only: int, b_only: int, neither: int, confidence: float, name: str
) -> tuple[int, float]:
    """n and the two-sided normal quantile; ValueError for a table or level that is not one."""
    counts = {"both": both, "a_only": a_only, "b_only": b_only, "neither": neither}
    for key, v in counts.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name}: {key} must be a count (an int >= 0), got {v!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"{name}: confidence must be in (0, 1), got {confidence}")
    n = both + a_only + b_only + neither
    if n == 0:
        raise ValueError(f"{name}: no pairs (all four counts are 0): the difference is undefined")
    return n, two_sided_z(1 - confidence)


def newcombe_paired(
    both: int, a_only: int, b_only: int, neither: int, confidence: float = CONFIDENCE
) -> PairedDiff:
    """Newcombe's hybrid score interval for a paired difference (method 10, 1998)."""
    n, z = _checked(both, a_only, b_only, neither, confidence, "newcombe_paired")
    a_fail, b_fail = both + a_only, both + b_only  # the margins: each target's failing count
    pa, pb = a_fail / n, b_fail / n
    la, ua = wilson(a_fail, n, z)
    lb, ub = wilson(b_fail, n, z)
    # the correlation of the two rates (phi of the table), with Newcombe's correction: a
    # positive numerator shrinks by n/2 (to 0 at most); 0 when a margin is empty
    margins = a_fail * (n - a_fail) * b_fail * (n - b_fail)
    phi = 0.0
    if margins:
        cross = both * neither - a_only * b_only
        corrected = max(0.0, cross - n / 2) if cross > 0 else float(cross)
        phi = corrected / math.sqrt(margins)
    diff = pa - pb
    # lower limit: A as low as plausible, B as high; upper: the reverse
    a_down, b_up = pa - la, ub - pb
    a_up, b_down = ua - pa, pb - lb
    low = diff - math.sqrt(max(0.0, a_down**2 - 2 * phi * a_down * b_up + b_up**2))
    high = diff + math.sqrt(max(0.0, a_up**2 - 2 * phi * a_up * b_down + b_down**2))
    return PairedDiff(diff, max(-1.0, low), min(1.0, high))


def _tango_score(delta: float, a_only: int, b_only: int, n: int) -> float:
    """Tango's score statistic for the null hypothesis "the difference is delta".

    The share of b_only pairs is profiled out at its maximum likelihood under that null
    (the positive root of a quadratic); the statistic falls as delta rises.
    """
    qa = 2 * n
    qb = (2 * n - a_only + b_only) * delta - a_only - b_only
    qc = -b_only * delta * (1 - delta)
    p_b_only = (math.sqrt(max(0.0, qb * qb - 4 * qa * qc)) - qb) / (2 * qa)
    variance = n * (2 * p_b_only + delta * (1 - delta))
    excess = a_only - b_only - n * delta
    if variance <= 0:
        return math.copysign(math.inf, excess) if excess else 0.0
    return excess / math.sqrt(variance)


def tango_paired(
    both: int, a_only: int, b_only: int, neither: int, confidence: float = CONFIDENCE
) -> PairedDiff:
    """Tango's score interval for a paired difference (1998), solved numerically."""
    n, z = _checked(both, a_only, b_only, neither, confidence, "tango_paired")
    from scipy.optimize import brentq  # imported here: most `kora` commands never need it

    diff = (a_only - b_only) / n
    # the score is 0 at diff and monotone: each limit is where it crosses -z or +z,
    # else the end of [-1, 1] (the score never gets that far)
    edge = 1 - 1e-12

    def crossing(target: float, lo: float, hi: float) -> float:
        return float(
            brentq(lambda d: _tango_score(d, a_only, b_only, n) - target, lo, hi, xtol=1e-13)
        )

    low = -1.0
    if diff > -edge and _tango_score(-edge, a_only, b_only, n) > z:
        low = crossing(z, -edge, diff)
    high = 1.0
    if diff < edge and _tango_score(edge, a_only, b_only, n) < -z:
        high = crossing(-z, diff, edge)
    return PairedDiff(diff, low, high)


def paired_difference_ci(
    both: int,
    a_only: int,
    b_only: int,
    neither: int,
    method: Method = "newcombe",
    confidence: float = CONFIDENCE,
) -> PairedDiff:
    """(diff, low, high) of A's failing rate minus B's by the method named.

    Raises ValueError for a negative or non-integer count, an empty table, a confidence
    outside (0, 1) or an unknown method.
    """
    if method == "newcombe":
        return newcombe_paired(both, a_only, b_only, neither, confidence)
    if method == "tango":
        return tango_paired(both, a_only, b_only, neither, confidence)
    raise ValueError(f"paired_difference_ci: method must be 'newcombe' or 'tango', got {method!r}")
