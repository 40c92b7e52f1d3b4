"""How many paired test conversations a comparison of two targets needs: the power of the
exact McNemar test and the sample size that reaches a given power. Pure functions.

A design is described by
- `delta`: the difference in failing rate to detect, p10 - p01 (p10: the share of pairs
  where A fails and B does not; p01: the reverse), e.g. 0.05;
- `psi`: the discordance, p10 + p01, the share of pairs where the two targets disagree,
  from an earlier run of the two targets (`(a_only + b_only) / n`) or an assumption;
- `alpha`: the level of each test, already adjusted for many tests (e.g. 0.05 / m for
  Bonferroni, or for Holm's first step, over m cells);
- the power wanted, e.g. 0.8.

The test rejects when its p-value is below alpha (`p < alpha`, as `Paired.significant`).

Connor (1987, Biometrics 43:207) gives a normal-approximation n; the exact (conditional)
test needs a few per cent more when alpha is not small. `mcnemar_power` computes the
exact test's power exactly: the number of discordant pairs is Binomial(n, psi), and given
d of them the A-only count is Binomial(d, p10 / psi); the power sums the rejection
probability over both. `sample_size` starts from Connor's n and searches for the smallest
n whose exact power meets the target (tests/simulated.py checks it by simulation). A
design's figures are checked once, where `kora plan --detect` reads them (plan_detect).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from kora.analysis.stats.paired import ALPHA

POWER = 0.8
MAX_N = 10_000_000
# the share of the Binomial(n, psi) distribution of discordant pairs left out of the sum
# (both tails together): the power is exact to about this
TAIL = 1e-12


def _check_n(n: int, name: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"{name}: n must be a number of pairs (an int >= 0), got {n!r}")


def connor_sample_size(delta: float, psi: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Connor's (1987) n for McNemar's test, rounded up:
    (z_{1-alpha/2} sqrt(psi) + z_{power} sqrt(psi - delta^2))^2 / delta^2."""
    z = NormalDist()
    root = z.inv_cdf(1 - alpha / 2) * math.sqrt(psi) + z.inv_cdf(power) * math.sqrt(
        psi - delta * delta
    )
    # a hair below an integer is that integer (floating point), not the next one
    return max(1, math.ceil(root * root / (delta * delta) - 1e-9))


def _critical(d: npt.NDArray[np.int64], alpha: float) -> npt.NDArray[np.int64]:
    """For each number of discordant pairs d, the largest k with 2 P(X <= k) < alpha for
    X ~ Binomial(d, 1/2): the test rejects when the smaller discordant count is at most k
    (-1: it never rejects)."""
    from scipy.stats import binom

    k = np.asarray(binom.ppf(alpha / 2, d, 0.5), dtype=np.int64) - 1
    # ppf is the smallest k with P(X <= k) >= alpha / 2; settle floating-point doubt at
    # the boundary with the same cdf the p-values use
    for _ in range(2):
        k = np.where((k >= 0) & (2 * binom.cdf(k, d, 0.5) >= alpha), k - 1, k)
        k = np.where((k + 1 <= d) & (2 * binom.cdf(k + 1, d, 0.5) < alpha), k + 1, k)
    return np.asarray(k, dtype=np.int64)


def mcnemar_power(n: int, delta: float, psi: float, alpha: float = ALPHA) -> float:
    """The power of the exact McNemar test (p < alpha) on n pairs, computed exactly."""
    _check_n(n, "mcnemar_power")
    if n == 0:
        return 0.0
    from scipy.stats import binom

    lo, hi = binom.interval(1 - TAIL, n, psi)
    d = np.arange(int(lo), int(hi) + 1, dtype=np.int64)
    weight = binom.pmf(d, n, psi)
    k = _critical(d, alpha)
    share_a = min(1.0, (psi + delta) / (2 * psi))  # p10 / psi
    # the smaller count is at most k: A-only <= k, or B-only <= k (A-only >= d - k); the
    # two never overlap, as 2 P(X <= k) < alpha < 1 puts k below d / 2
    reject = np.where(k >= 0, binom.cdf(k, d, share_a) + binom.sf(d - k - 1, d, share_a), 0.0)
    return float(min(1.0, np.sum(weight * reject)))


@dataclass(frozen=True)
class SampleSize:
    """The pairs needed to detect `delta` with `target` power by the exact McNemar test.

    `n`: the smallest n whose exact power (`power`) meets the target; `connor_n`: Connor's
    normal-approximation n, with the exact test's power there (`connor_power`), which
    falls short of the target when alpha is not small.
    """

    n: int
    power: float
    connor_n: int
    connor_power: float
    delta: float
    psi: float
    alpha: float
    target: float


def sample_size(delta: float, psi: float, alpha: float = ALPHA, power: float = POWER) -> SampleSize:
    """The smallest number of pairs at which the exact McNemar test has the power wanted.

    From Connor's n, a doubling search brackets the first n that meets the target and a
    bisection narrows it down. The power rises with n whenever psi < 1 (checked
    numerically over a range of designs); at psi = 1 it saw-tooths, and the n returned
    meets the target where n - 1 does not. Raises ValueError beyond MAX_N pairs.
    """
    start = connor_sample_size(delta, psi, alpha, power)

    def meets(m: int) -> bool:
        if m > MAX_N:
            raise ValueError(
                f"sample_size: more than {MAX_N} pairs needed for delta={delta}, psi={psi}, "
                f"alpha={alpha}, power={power}"
            )
        return mcnemar_power(m, delta, psi, alpha) >= power

    # bracket: lo does not meet the target (n = 0 never does), hi does
    step = 1
    if meets(start):
        lo, hi = start - 1, start
        while lo > 0 and meets(lo):
            hi, lo = lo, max(0, lo - step)
            step *= 2
    else:
        lo, hi = start, start + 1
        while not meets(hi):
            lo, hi = hi, hi + step
            step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return SampleSize(
        n=hi,
        power=mcnemar_power(hi, delta, psi, alpha),
        connor_n=start,
        connor_power=mcnemar_power(start, delta, psi, alpha),
        delta=delta,
        psi=psi,
        alpha=alpha,
        target=power,
    )
