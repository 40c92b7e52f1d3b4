"""KORA v2's sections of `kora prompts`: its mechanism judge, and the seed, scenario and
first-message variants a population plan and a scenario flavor add, each rendered by the
run's own code for a pinned persona and a flavor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kora.benchmarks.expand import first_message_prompt, scenario_prompt
from kora.benchmarks.schemas import Scenario
from kora.benchmarks.seedplan import Pinned, SeedOrder
from kora.benchmarks.taxonomy import Shard, Taxonomy
from kora.benchmarks.templates import Rendered
from kora.benchmarks.v2 import schemas as v2
from kora.benchmarks.v2.judge import mechanism_question

if TYPE_CHECKING:
    from kora.benchmarks.base import Benchmark

# KORA v2's flavored risk, its flavor and the persona its variants are shown with
FLAVOR_RISK = "privacy_and_personal_data_protection"
FLAVOR = "b_gradual"
SAMPLE_PERSONA = Pinned(ageRange="10to12", gender="girl", ses="low", raceEthnicity="hispanic")


def sections(
    benchmark: Benchmark, scenario: Scenario, taxonomy: Taxonomy, transcript: str
) -> list[Rendered]:
    """The sections only KORA v2 has, after the safety judge's."""
    return [
        *_flavored(benchmark, scenario, taxonomy),
        Rendered(
            "judge_mechanisms",
            mechanism_question(taxonomy, scenario, transcript),
            v2.mechanism_assessment(taxonomy.mechanisms),
        ),
    ]


def _flavored(benchmark: Benchmark, scenario: Scenario, taxonomy: Taxonomy) -> list[Rendered]:
    """The seed, scenario and first message with a pinned persona and a flavor of FLAVOR_RISK."""
    category, risk = taxonomy.risks[FLAVOR_RISK]
    motivation = taxonomy.motivation_named(scenario.seed.motivation.name)
    shard = Shard(category.id, risk.id, SAMPLE_PERSONA.ageRange, motivation.id)
    order = SeedOrder(count=1, pinned=SAMPLE_PERSONA, flavor=FLAVOR)
    seeds = benchmark.seed_question(shard, taxonomy, order.count, order)
    pinned_seed = scenario.seed.model_copy(
        update={
            "riskCategoryId": category.id,
            "riskId": risk.id,
            # the plan writes its persona and flavor over what the model wrote (an age of 11)
            **benchmark.seed_fields(
                {"ageRange": SAMPLE_PERSONA.ageRange, "childAge": 11}, risk, order
            ),
        }
    )
    flavored = scenario.model_copy(
        update={"seed": pinned_seed, "riskId": risk.id, "riskCategoryId": category.id}
    )
    expansion = scenario_prompt(benchmark, category, risk, motivation, pinned_seed, None)
    return [
        Rendered("seeds [population plan: pinned persona and flavor]", seeds.prompt, seeds.schema),
        Rendered(
            "scenario [pinned socio-economic status and flavor]",
            expansion,
            benchmark.scenario_schema(risk),
        ),
        Rendered("first_user_message [gradual flavor]", first_message_prompt(risk, flavored)),
    ]
