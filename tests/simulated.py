"""The exact McNemar test over many simulated studies at once: the check, by simulation,
of the power kora.analysis.stats.power computes exactly (tests/test_compare_stats.py,
tests/test_sizing.py and bench/power.py use it)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kora.analysis.stats.paired import ALPHA


def exact_mcnemar_pvalues(a_only: npt.ArrayLike, b_only: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The exact McNemar (two-sided sign test) p-values of many tables at once: the same
    values as `paired.sign_test`, elementwise."""
    from scipy.stats import binom

    b = np.asarray(a_only, dtype=np.int64)
    c = np.asarray(b_only, dtype=np.int64)
    p = np.minimum(1.0, 2 * binom.cdf(np.minimum(b, c), b + c, 0.5))
    return np.asarray(p, dtype=np.float64)


def simulate_mcnemar_power(
    n: int, delta: float, psi: float, alpha: float = ALPHA, runs: int = 1000, seed: int = 0
) -> float:
    """The share of `runs` simulated studies of n pairs in which the exact McNemar test
    rejects (p < alpha); deterministic for a seed. Standard error about
    sqrt(power (1 - power) / runs)."""
    p10, p01 = (psi + delta) / 2, (psi - delta) / 2
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, [p10, p01, max(0.0, 1 - p10 - p01)], size=runs)
    p = exact_mcnemar_pvalues(counts[:, 0], counts[:, 1])
    return float(np.mean(p < alpha))
