"""Targets ranked by failing rate on the scenarios they all share, with how sure each rank
is: a seeded bootstrap over scenarios. Pure functions.

Each resample draws as many scenario keys as are shared, with replacement, and uses the
same draw for every target (the targets stay paired: a hard scenario is hard for all of
them). In each resample the targets are ranked by failing count, 1 = fewest failing; ties
share the best rank ("1, 2, 2, 4"). A target's rank interval is the 2.5th to 97.5th
percentile of its ranks over the resamples (at 95 %), each an observed rank.

Which targets are tied: A is ahead of B when A's failing rate is strictly lower than B's
in at least 97.5 % of the resamples (at 95 %: (1 + confidence) / 2), i.e. the bootstrap
puts the paired difference below 0 with one-sided 97.5 % confidence; two targets are
tied when neither is ahead. Each pair is judged on its own, without adjustment for the
number of pairs: a description, not a test. Ties are not transitive: A tied with B and B
with C does not tie A with C. (Rank intervals that overlap would tie more targets: an
interval carries the uncertainty of every other target too.)
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

CONFIDENCE = 0.95
RESAMPLES = 2000
# the bootstrap runs in slices of at most this many (resample, scenario, target) cells
_CELLS = 4_000_000

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class TargetRank:
    """One target's failing rate on the shared scenarios, its rank and rank interval."""

    target: str
    failing: int
    rate: float
    rank: int
    low: int
    high: int


@dataclass(frozen=True)
class Ranking:
    """The targets' ranks over `n` shared scenarios, from `resamples` bootstrap resamples.

    `ranks`: by rank, then name. `lower_share[a][b]`: the share of resamples in which a's
    failing rate is strictly lower than b's.
    """

    n: int
    resamples: int
    seed: int
    confidence: float
    ranks: tuple[TargetRank, ...]
    lower_share: dict[str, dict[str, float]]

    def rank_of(self, target: str) -> TargetRank:
        for r in self.ranks:
            if r.target == target:
                return r
        raise KeyError(target)

    def ahead(self, a: str, b: str) -> bool:
        """a's failing rate is lower than b's in at least (1 + confidence) / 2 of the
        resamples."""
        return self.lower_share[a][b] >= (1 + self.confidence) / 2

    def tied_with(self, target: str) -> list[str]:
        """The targets tied with `target` (neither ahead of the other), in rank order."""
        self.rank_of(target)  # KeyError for an unknown target
        return [
            r.target
            for r in self.ranks
            if r.target != target
            and not self.ahead(target, r.target)
            and not self.ahead(r.target, target)
        ]


def _rank_min(counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Ranks along the last axis, 1 = smallest, ties sharing the best rank: one plus the
    number of strictly smaller values."""
    smaller = counts[..., np.newaxis, :] < counts[..., :, np.newaxis]
    return np.asarray(1 + smaller.sum(axis=-1), dtype=np.int64)


def bootstrap_ranks(failing: Mapping[str, Mapping[K, bool | int]]) -> Ranking:
    """Rank targets by failing rate (1 = lowest) with bootstrap rank intervals
    (RESAMPLES resamples, seeded with 0, at CONFIDENCE).

    `failing`: per target, scenario key -> failing (True/False or 1/0). Only the keys
    every target has are used (report.pairs.rank_intervals ranks targets that share
    some). Deterministic. Raises ValueError for a value other than 0/1.
    """
    targets = list(failing)
    table = _failing_table(failing, targets)
    boot = _resampled_counts(table)
    return Ranking(
        n=len(table),
        resamples=RESAMPLES,
        seed=0,
        confidence=CONFIDENCE,
        ranks=_target_ranks(targets, table, boot),
        lower_share={
            a: {b: float(np.mean(boot[:, i] < boot[:, j])) for j, b in enumerate(targets)}
            for i, a in enumerate(targets)
        },
    )


def _failing_table(
    failing: Mapping[str, Mapping[K, bool | int]], targets: list[str]
) -> npt.NDArray[np.int8]:
    """Scenarios every target has x targets, 1 = failing, in an order a seed can fix."""
    shared = set(failing[targets[0]])
    for t in targets[1:]:
        shared &= set(failing[t])
    keys = sorted(shared, key=repr)
    for t in targets:
        for k in keys:
            v = failing[t][k]
            if v not in (0, 1) or not isinstance(v, bool | int | np.integer | np.bool_):
                raise ValueError(
                    f"bootstrap_ranks: {t}, scenario {k!r}: failing must be 0/1 or a bool, got {v!r}"
                )
    return np.array([[int(failing[t][k]) for t in targets] for k in keys], dtype=np.int8)


def _resampled_counts(table: npt.NDArray[np.int8]) -> npt.NDArray[np.int64]:
    """Each target's failing count in each resample, one draw of scenarios for all targets."""
    n, m = table.shape
    rng = np.random.default_rng(0)
    boot = np.empty((RESAMPLES, m), dtype=np.int64)
    step = max(1, _CELLS // (n * m))
    for start in range(0, RESAMPLES, step):
        size = min(step, RESAMPLES - start)
        drawn = rng.integers(0, n, size=(size, n))
        boot[start : start + size] = table[drawn].sum(axis=1, dtype=np.int64)
    return boot


def _target_ranks(
    targets: list[str], table: npt.NDArray[np.int8], boot: npt.NDArray[np.int64]
) -> tuple[TargetRank, ...]:
    """Each target's rank and rank interval, by rank, then failing count, then name."""
    n = len(table)
    counts = table.sum(axis=0, dtype=np.int64)
    ranks = _rank_min(boot)
    tail = (1 - CONFIDENCE) / 2
    low = np.quantile(ranks, tail, axis=0, method="inverted_cdf")
    high = np.quantile(ranks, 1 - tail, axis=0, method="inverted_cdf")
    point = _rank_min(counts)
    order = sorted(range(len(targets)), key=lambda i: (int(point[i]), int(counts[i]), targets[i]))
    return tuple(
        TargetRank(
            target=targets[i],
            failing=int(counts[i]),
            rate=float(counts[i]) / n,
            rank=int(point[i]),
            low=int(low[i]),
            high=int(high[i]),
        )
        for i in order
    )
