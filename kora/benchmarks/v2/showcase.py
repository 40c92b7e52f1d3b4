"""KORA v2's sections of `kora prompts`: its mechanism judge, and the seed, scenario and
first-message variants a population plan and a scenario flavor add."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kora.benchmarks.schemas import Scenario
from kora.benchmarks.seedplan import Pinned
from kora.benchmarks.taxonomy import Taxonomy
from kora.benchmarks.templates import Rendered, render
from kora.benchmarks.v2 import schemas as v2

if TYPE_CHECKING:
    from kora.benchmarks.base import Benchmark

# KORA v2's flavored risk and the persona its variants are shown with
FLAVOR_RISK = "privacy_and_personal_data_protection"
SAMPLE_PERSONA = Pinned(ageRange="10to12", gender="girl", ses="low", raceEthnicity="hispanic")


def sections(
    benchmark: Benchmark, scenario: Scenario, taxonomy: Taxonomy, transcript: str
) -> list[Rendered]:
    """The sections only KORA v2 has, after the safety judge's."""
    return [
        *_flavored(scenario, taxonomy),
        Rendered(
            "judge_mechanisms",
            render(
                "judge_mechanisms",
                mechanisms=taxonomy.mechanisms,
                seed=scenario.seed,
                scenario=scenario,
                transcript=transcript,
            ),
            v2.mechanism_assessment(taxonomy.mechanisms),
        ),
    ]


def _flavored(scenario: Scenario, taxonomy: Taxonomy) -> list[Rendered]:
    """The seed, scenario and first message with a pinned persona and a flavor of FLAVOR_RISK."""
    category, risk = taxonomy.risks[FLAVOR_RISK]
    flavor = next(f for f in risk.scenarioFlavors or [] if f.id == "b_gradual")
    motivation = taxonomy.motivation_named(scenario.seed.motivation.name)
    pinned_seed = scenario.seed.model_copy(
        update={
            "riskCategoryId": category.id,
            "riskId": risk.id,
            "ageRange": "10to12",
            "childAge": 11,
            "childGender": "girl",
            "childRaceEthnicity": "hispanic",
            "childSES": "low",
            "scenarioFlavorId": flavor.id,
        }
    )
    flavored = scenario.model_copy(
        update={"seed": pinned_seed, "riskId": risk.id, "riskCategoryId": category.id}
    )
    ses = v2.SES_DESCRIPTIONS["low"]
    return [
        Rendered(
            "seeds [population plan: pinned persona and flavor]",
            render(
                "seeds",
                category=category,
                risk=risk,
                age_range="10to12",
                motivation=motivation,
                count=1,
                pinned=SAMPLE_PERSONA,
                ses_description=ses,
                flavor=flavor,
            ),
            v2.ModelScenarioSeeds,
        ),
        Rendered(
            "scenario [pinned socio-economic status and flavor]",
            render(
                "scenario",
                category=category,
                risk=risk,
                motivation=motivation,
                seed=pinned_seed,
                with_memory=False,
                feedback=None,
                flavor=flavor,
                ses_description=ses,
            ),
            v2.ModelScenarioLight,
        ),
        Rendered(
            "first_user_message [gradual flavor]",
            render("first_user_message", risk=risk, seed=pinned_seed, scenario=flavored),
        ),
    ]
