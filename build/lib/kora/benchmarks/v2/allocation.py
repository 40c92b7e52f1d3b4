"""Seeds that match a population (KORA v2): how many seeds of each age range, gender,
socio-economic status and race/ethnicity, which motivation and which scenario flavor
each gets, from a distribution and a random seed.

A port of the canonical allocation (packages/benchmark/src/allocation/ and kora.ts):
the same pseudo-random generator (mulberry32), shuffle (Fisher-Yates from the end) and
order of draws, so the same `random_seed` gives the same plan as the canonical
implementation, and the same plan on every run. Counts per dimension come from the
largest-remainder method: each is the floor of its exact share or one more, ties going
to the earlier key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
Rng = Callable[[], float]

# marginal shares of US children aged 7-17 (the canonical "us-census-2020" preset)
US_CENSUS_2020: dict[str, dict[str, float]] = {
    "ageRange": {"7to9": 0.27, "10to12": 0.27, "13to17": 0.46},
    "gender": {"girl": 0.5, "boy": 0.5},
    "ses": {"low": 0.28, "middle": 0.46, "high": 0.26},
    "raceEthnicity": {"white": 0.51, "hispanic": 0.25, "black": 0.13, "asian": 0.05, "other": 0.06},
}
PRESETS = {"us-census-2020": US_CENSUS_2020}


def mulberry32(seed: int) -> Rng:
    """Numbers in [0, 1), the canonical generator's sequence for `seed`."""
    state = seed & 0xFFFFFFFF

    def imul(a: int, b: int) -> int:
        return (a * b) & 0xFFFFFFFF

    def next_value() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & 0xFFFFFFFF
        t = state
        t = imul(t ^ (t >> 15), t | 1)
        t ^= (t + imul(t ^ (t >> 7), t | 61)) & 0xFFFFFFFF
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296

    return next_value


def shuffled(items: Sequence[T], rng: Rng) -> list[T]:
    out = list(items)
    for i in range(len(out) - 1, 0, -1):
        j = math.floor(rng() * (i + 1))
        out[i], out[j] = out[j], out[i]
    return out


def sample(items: Sequence[T], k: int, rng: Rng) -> list[T]:
    """`k` distinct items in their given order, as the canonical plan picks cells without a
    distribution (remeda's `sample`): the smaller of the `k` kept and the `len - k` left
    out is drawn, one index at a time (a repeat drawn again), and kept or left out."""
    n = len(items)
    if k <= 0:
        return []
    if k >= n:
        return list(items)
    drawn: set[int] = set()
    while len(drawn) < min(k, n - k):
        drawn.add(math.floor(rng() * n))
    if len(drawn) == k:
        return [items[i] for i in sorted(drawn)]
    return [x for i, x in enumerate(items) if i not in drawn]


def largest_remainder(shares: Mapping[str, float], total: int) -> dict[str, int]:
    """Whole counts summing to `total`, each the floor of its share of it or one more."""
    if total < 0:
        raise ValueError(f"total must be a whole number >= 0, not {total}")
    if not shares:
        raise ValueError("no shares to allocate")
    if abs(sum(shares.values()) - 1) > 1e-6:
        raise ValueError(f"shares sum to {sum(shares.values())}, not 1")
    exact = {k: v * total for k, v in shares.items()}
    counts = {k: math.floor(x) for k, x in exact.items()}
    order = sorted(enumerate(shares), key=lambda ik: (-(exact[ik[1]] - counts[ik[1]]), ik[0]))
    for _, k in order[: total - sum(counts.values())]:
        counts[k] += 1
    return counts


def _expanded(counts: Mapping[str, int]) -> list[str]:
    return [k for k, n in counts.items() for _ in range(n)]


@dataclass(frozen=True)
class Persona:
    ageRange: str
    gender: str
    ses: str
    raceEthnicity: str


def personas(
    distribution: Mapping[str, Mapping[str, float]],
    total: int,
    rng: Rng,
    age_ranges: Sequence[str] | None = None,
) -> list[Persona]:
    """`total` personas whose marginals match the distribution exactly (dimensions drawn
    independently, then zipped); `age_ranges` keeps those ranges, their shares
    renormalised."""
    if total == 0:
        return []
    ages = dict(distribution["ageRange"])
    if age_ranges is not None and len(age_ranges) != len(ages):
        kept = {a: ages.get(a, 0.0) for a in age_ranges}
        if sum(kept.values()) <= 0:
            raise ValueError(f"age ranges {', '.join(age_ranges)} have no share")
        ages = {a: v / sum(kept.values()) for a, v in kept.items()}
    columns = [
        shuffled(_expanded(largest_remainder(shares, total)), rng)
        for shares in (
            ages,
            distribution["gender"],
            distribution["ses"],
            distribution["raceEthnicity"],
        )
    ]
    # each dimension counted before any shuffle, as the canonical code does
    return [Persona(*row) for row in zip(*columns, strict=True)]


def flavors(shares: Sequence[tuple[str, float]], total: int, rng: Rng) -> list[str]:
    if total == 0:
        return []
    counts = largest_remainder(dict(shares), total)
    return shuffled(_expanded(counts), rng)


@dataclass(frozen=True)
class PlannedSeed:
    risk: str
    persona: Persona
    motivation: str
    flavor: str | None


def seed_plan(
    risks: Sequence[Mapping[str, Any]],
    motivations: Sequence[str],
    total_seeds: int,
    distribution: Mapping[str, Mapping[str, float]],
    random_seed: int,
    age_ranges: Sequence[str] | None = None,
) -> list[PlannedSeed]:
    """One planned seed per persona, `total_seeds` per risk, in the canonical order of
    draws: per risk, its personas, then the motivation cycle, then its flavors."""
    rng = mulberry32(random_seed)
    out: list[PlannedSeed] = []
    for risk in risks:
        people = personas(distribution, total_seeds, rng, age_ranges)
        cycle = shuffled(list(motivations), rng)
        risk_flavors = risk.get("scenarioFlavors") or []
        ids = (
            flavors([(f["id"], f["proportion"]) for f in risk_flavors], total_seeds, rng)
            if risk_flavors
            else None
        )
        for i, p in enumerate(people):
            out.append(
                PlannedSeed(str(risk["id"]), p, cycle[i % len(cycle)], ids[i] if ids else None)
            )
    return out
