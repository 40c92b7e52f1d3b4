"""KORA v2's population-true seed plan (kora.benchmarks.v2.allocation) against the canonical counts
and the canonical generator."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from kora.benchmarks.v2.allocation import (
    US_CENSUS_2020,
    largest_remainder,
    mulberry32,
    sample,
    seed_plan,
)
from tests.helpers import upstream

MOTIVATIONS = [f"m{i}" for i in range(10)]


def v2_risks() -> list[dict[str, object]]:
    data = orjson.loads(upstream("v2/packages/benchmark/data/risks.json").read_bytes())
    return [r for c in data for r in c["risks"]]


def test_the_generator_is_the_canonical_one() -> None:
    # the canonical makeRng(42) (allocation/rng.ts) run in node gives these
    rng = mulberry32(42)
    assert [rng() for _ in range(4)] == [
        0.6011037519201636,
        0.44829055899754167,
        0.8524657934904099,
        0.6697340414393693,
    ]


def test_sample_keeps_the_given_order_and_draws_the_smaller_side() -> None:
    items = list(range(10))
    assert sample(items, 0, mulberry32(5)) == []
    assert sample(items, 10, mulberry32(5)) == sample(items, 12, mulberry32(5)) == items
    # the lists remeda's sample gives under node with Math.random set to makeRng(5);
    # mulberry32(5) x 10 gives the indices 6, 7, 2, 6 (drawn again: a repeat), 0, ...
    assert sample(items, 4, mulberry32(5)) == [0, 2, 6, 7]
    # 6 of 10: the 4 drawn are the ones left out
    assert sample(items, 6, mulberry32(5)) == [1, 3, 4, 5, 8, 9]
    assert sample(items, 5, mulberry32(5)) == [0, 2, 5, 6, 7]


def test_largest_remainder_gives_ties_to_the_earlier_key() -> None:
    assert largest_remainder({"a": 0.25, "b": 0.4, "c": 0.2, "d": 0.15}, 30) == {
        "a": 8, "b": 12, "c": 6, "d": 4}  # fmt: skip
    assert sum(largest_remainder(US_CENSUS_2020["raceEthnicity"], 7).values()) == 7
    with pytest.raises(ValueError, match="sum"):
        largest_remainder({"a": 0.5}, 3)


def test_thirty_seeds_of_the_census_have_the_canonical_counts() -> None:
    risks = v2_risks()
    privacy = next(r for r in risks if r["id"] == "privacy_and_personal_data_protection")
    plan = seed_plan([privacy], MOTIVATIONS, 30, US_CENSUS_2020, random_seed=7)
    assert len(plan) == 30
    count = lambda f: Counter(f(p) for p in plan)  # noqa: E731
    assert count(lambda p: p.persona.ageRange) == {"7to9": 8, "10to12": 8, "13to17": 14}
    assert count(lambda p: p.persona.ses) == {"low": 8, "middle": 14, "high": 8}
    assert count(lambda p: p.persona.raceEthnicity) == {
        "white": 15, "hispanic": 8, "black": 4, "asian": 1, "other": 2}  # fmt: skip
    assert count(lambda p: p.persona.gender) == {"girl": 15, "boy": 15}
    assert sorted(count(lambda p: p.flavor).values()) == [4, 6, 8, 12]
    flavors = count(lambda p: p.flavor)
    assert (flavors["a_direct"], flavors["b_gradual"], flavors["d_authority"],
            flavors["e_fictional"]) == (8, 12, 6, 4)  # fmt: skip
    # every motivation, three times each (the cycle over 30 seeds)
    assert set(count(lambda p: p.motivation).values()) == {3}


def test_the_same_random_seed_gives_the_same_plan() -> None:
    risks = v2_risks()[:3]
    a = seed_plan(risks, MOTIVATIONS, 30, US_CENSUS_2020, random_seed=11)
    b = seed_plan(risks, MOTIVATIONS, 30, US_CENSUS_2020, random_seed=11)
    c = seed_plan(risks, MOTIVATIONS, 30, US_CENSUS_2020, random_seed=12)
    assert a == b and a != c and len(a) == 90


def test_age_ranges_left_out_share_out_their_seeds() -> None:
    plan = seed_plan(v2_risks()[:1], MOTIVATIONS, 30, US_CENSUS_2020, 1, ["13to17"])
    assert {p.persona.ageRange for p in plan} == {"13to17"}
