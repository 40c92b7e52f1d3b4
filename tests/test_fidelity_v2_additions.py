"""The three additions of the project's seed prompt (docs/fidelity.md, SD-A1 to SD-A3)
render in KORA v2's seed prompt too (docs/fidelity-v2.md, SD2-A1 to SD2-A3): with
per-risk totals (`grid.total_seeds` without a distribution) every seed call asks for one
seed, so the rule for fewer than five is sent on every call."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from kora import benchmarks
from kora.benchmarks.schemas import Scenario
from kora.benchmarks.showcase import rendered_prompts
from kora.benchmarks.taxonomy import load_taxonomy

pytestmark = pytest.mark.timeout(60)
REPO = Path(__file__).resolve().parents[1]
V2 = benchmarks.get("v2")

AGES_WRITTEN_OUT = "(children aged 7 to 9)"  # SD2-A1
LOWER_CASE = "written in lower case in the answer"  # SD2-A2
FEWER_THAN_FIVE = "all five cannot occur"  # SD2-A3


def seed_prompt(count: int, section: str = "seeds") -> str:
    scenario = Scenario.model_validate(
        orjson.loads((REPO / "docs/example-scenario.json").read_bytes())
    )
    taxonomy = load_taxonomy(REPO / "data/taxonomy/v2")
    found = {r.name: r for r in rendered_prompts(V2, scenario, taxonomy, count)}
    return str(found[section].prompt.user)


def test_a_v2_seed_call_of_one_seed_carries_all_three_additions() -> None:
    one = seed_prompt(1)
    assert "Write 1 different scenario seed for" in one
    for addition in (AGES_WRITTEN_OUT, LOWER_CASE, FEWER_THAN_FIVE):
        assert addition in one
    # the reference's rule for five and more is what a batch of 8 gets
    eight = seed_prompt(8)
    assert FEWER_THAN_FIVE not in eight and "must occur at least once" in eight


def test_a_pinned_population_seed_carries_the_written_out_ages_only() -> None:
    pinned = seed_prompt(1, "seeds [population plan: pinned persona and flavor]")
    assert "(children aged 10 to 12)" in pinned
    assert LOWER_CASE not in pinned and FEWER_THAN_FIVE not in pinned
