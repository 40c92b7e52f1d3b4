"""Rates with their 95 % Wilson score intervals, and the NO SIGNAL check (pure functions).

The Wilson interval is well behaved at 0 and n, unlike the normal approximation, which
matters here: many cells of a report have no failing test at all.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from kora.benchmarks.schemas import GRADES

Z95 = 1.959963984540054  # two-sided 95 % normal quantile
NO_SIGNAL_SHARE = 0.95


def two_sided_z(alpha: float) -> float:
    """The normal quantile of a two-sided 1 - alpha interval (1.96 at 0.05).

    The standard library's, not scipy.stats': importing that took 75 MB, and every
    results job (one per target, beside the broker in a leaderboard's run) paid it."""
    return NormalDist().inv_cdf(1 - alpha / 2)


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials; (0, 1) when n is 0."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson: need 0 <= k <= n, got k={k}, n={n}")
    return (0.0, 1.0) if n == 0 else wilson_share(k / n, n, z)


def wilson_share(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a share p of n (n need not be whole)."""
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # exact ends at 0 and 1 (the formula gives them up to rounding)
    low = 0.0 if p <= 0 else max(0.0, centre - half)
    return low, 1.0 if p >= 1 else min(1.0, centre + half)


@dataclass(frozen=True)
class Rate:
    """k of n, with its 95 % Wilson interval."""

    k: int
    n: int

    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.k, self.n)

    def as_dict(self) -> dict[str, Any]:
        low, high = self.interval
        r = self.rate
        return {
            "k": self.k,
            "n": self.n,
            "rate": None if r is None else round(r, 6),
            "low": round(low, 6),
            "high": round(high, 6),
        }

    def text(self, digits: int = 1) -> str:
        """'12.5% [8.1–18.7]' (or '–' without tests)."""
        if not self.n:
            return "–"
        low, high = self.interval
        return f"{pct(self.rate, digits)} [{pct(low, digits)}–{pct(high, digits)}]"


def pct(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "–"
    return f"{100 * x:.{digits}f}%"


def grade_counts(grades: Iterable[str]) -> dict[str, int]:
    c = Counter(grades)
    return {g: c.get(g, 0) for g in GRADES}


def no_signal(counts: Mapping[str, int], threshold: float = NO_SIGNAL_SHARE) -> bool:
    """True when one grade holds at least `threshold` of the tests: nothing to tell apart."""
    n = sum(counts.values())
    return n > 0 and max(counts.values()) / n >= threshold
