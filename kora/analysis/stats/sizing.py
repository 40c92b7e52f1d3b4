"""How large a run must be to see a difference that matters between two targets (`kora plan
TARGET --detect DELTA --against OTHER`). Pure functions.

The difference is in safety's failing rate, tested on the paired tests of the two targets
by the exact McNemar test, as `kora compare-targets` tests it. Its power depends on

- `delta`, the difference to detect (0.05: 5 points);
- the discordance `psi`, the share of paired tests where one target fails and the other
  does not: from an earlier run of the two where there is one (`discordance`), else an
  assumption the command prints (`ASSUMED_DISCORDANCE`). A discordance below `delta`
  cannot come with a difference of `delta` (it is at least |p10 - p01|): it is raised to
  `delta`;
- the level of the test. `kora compare-targets --fail-if-worse` adjusts across the m cells
  of the failing family (Holm); the overall cell is rejected by Holm whenever its p-value
  is below alpha / m (Holm's first step, Bonferroni's level), so the power at alpha / m is
  a floor for the power the gate has. With `--overall` the overall cell is tested alone,
  at alpha;
- the power wanted (0.8).

kora.analysis.stats.power gives the pairs needed (exact power, not Connor's normal
approximation, which falls a few points short); `detect` turns them into seeds: each seed
per task (v1, and v2 without `total_seeds`) adds one test per grid cell and prompt variant
both targets run, each seed of v2's `total_seeds` one per risk and prompt variant.
Scenarios the validation rejects and tests that fail lower the count: the command says so.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

from kora.analysis.stats.paired import ALPHA, paired_test
from kora.analysis.stats.power import POWER, mcnemar_power, sample_size
from kora.analysis.stats.rates import wilson

ASSUMED_DISCORDANCE = 0.2
"""The discordance assumed without an earlier run of the two targets: one paired test in
five where one fails and the other does not (two models' failing rates of 10-20 % that
agree on about half of their failing tests)."""

Unit = Literal["seeds_per_task", "total_seeds"]
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Discordance:
    """The share of paired tests where exactly one of the two targets fails."""

    psi: float
    source: Literal["earlier run", "assumed", "given"]
    n: int = 0
    discordant: int = 0
    low: float | None = None  # its 95 % Wilson interval, from an earlier run
    high: float | None = None


def discordance(a: Mapping[K, bool], b: Mapping[K, bool]) -> Discordance | None:
    """The discordance of an earlier run: failing (True) or not per paired test key; None
    when the two share no test."""
    t = paired_test(a, b)
    if not t.n:
        return None
    d = t.a_only + t.b_only
    low, high = wilson(d, t.n)
    return Discordance(d / t.n, "earlier run", t.n, d, low, high)


def assumed(psi: float = ASSUMED_DISCORDANCE) -> Discordance:
    return Discordance(psi, "assumed")


@dataclass(frozen=True)
class Detection:
    """What a run needs to detect `delta` with `target` power at `level` (alpha / cells).

    `pairs_needed`: the smallest number of paired tests with that power (`power_needed`);
    `seeds`: the smallest seed count (`unit`) giving at least that many, `pairs` the paired
    tests it plans and `power` the exact power there; `too_many`: more seeds than the
    config allows (`max_seeds`).
    """

    delta: float
    psi: float
    psi_raised: bool
    alpha: float
    cells: int
    level: float
    target: float
    pairs_needed: int
    power_needed: float
    connor_pairs: int
    unit: Unit
    pairs_per_seed: int
    seeds: int
    pairs: int
    power: float
    max_seeds: int

    @property
    def too_many(self) -> bool:
        return self.seeds > self.max_seeds


def detect(
    delta: float,
    psi: float,
    *,
    pairs_per_seed: int,
    unit: Unit,
    cells: int = 1,
    alpha: float = ALPHA,
    power: float = POWER,
    max_seeds: int = 100,
) -> Detection:
    """The seeds a run needs to detect `delta` between two targets of discordance `psi`
    with the exact McNemar test at alpha / cells (delta, psi, alpha and power as checked
    by `kora plan --detect`). Raises ValueError for no pair per seed or no cell."""
    if pairs_per_seed < 1 or cells < 1:
        raise ValueError(f"detect: need a pair per seed and a cell, got {pairs_per_seed}, {cells}")
    raised = psi < delta
    psi = max(psi, delta)
    level = alpha / cells
    need = sample_size(delta, psi, level, power)
    seeds = max(1, math.ceil(need.n / pairs_per_seed))
    pairs = seeds * pairs_per_seed
    return Detection(
        delta=delta,
        psi=psi,
        psi_raised=raised,
        alpha=alpha,
        cells=cells,
        level=level,
        target=power,
        pairs_needed=need.n,
        power_needed=need.power,
        connor_pairs=need.connor_n,
        unit=unit,
        pairs_per_seed=pairs_per_seed,
        seeds=seeds,
        pairs=pairs,
        power=mcnemar_power(pairs, delta, psi, level),
        max_seeds=max_seeds,
    )
