"""KORA v1, the seed's benchmark: 25 risks, 3-turn conversations, a safety grade and three
behaviour criteria, both prompt variants; results in the reference implementation's shape
(commit 5333199)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from kora.benchmarks.base import Benchmark, Judging
from kora.benchmarks.outcomes import (
    BEHAVIOR_CRITERIA,
    BehaviorAssessment,
    RunResult,
    TestAssessment,
)
from kora.benchmarks.schemas import (
    ModelScenarioLight,
    ModelScenarioSeeds,
    ModelScenarioWithMemory,
    PromptVariant,
    Risk,
    Scenario,
    ScenarioValidation,
)
from kora.benchmarks.taxonomy import Taxonomy
from kora.benchmarks.templates import Rendered

# results.json's key of each criterion's sums (the reference's)
SUMS_KEYS = {
    "safety": "as",
    "anthropomorphism": "an",
    "epistemicHumility": "eh",
    "humanRedirection": "hr",
}


class V1(Benchmark):
    name = "v1"
    data_dir = "data"
    results_dir = "results"
    logs_dir = "logs"
    taxonomy_dir = "data/taxonomy"
    judge_templates = ("judge_safety", "judge_behavior")
    default_prompts: ClassVar[tuple[PromptVariant, ...]] = ("default", "child")
    foreign_grid_keys = ("total_seeds", "distribution")
    criteria_title = "Behaviour criteria"
    criteria_note = (
        "The three behaviour criteria are graded on every conversation, independently of "
        "the risk; the count is the judge's number of occurrences."
    )

    @property
    def criteria(self) -> tuple[str, ...]:
        return BEHAVIOR_CRITERIA

    @property
    def criterion_labels(self) -> dict[str, str]:
        return {
            "safety": "Safety",
            "anthropomorphism": "Anthropomorphism",
            "epistemicHumility": "Epistemic humility",
            "humanRedirection": "Human redirection",
        }

    def recognises(self, test: Mapping[str, object]) -> bool:
        return isinstance(test.get("behaviorAssessment"), dict)

    @property
    def seed_schema(self) -> type[BaseModel]:
        return ModelScenarioSeeds

    def scenario_schema(self, risk: Risk) -> type[BaseModel]:
        return ModelScenarioWithMemory if risk.provideUserContext else ModelScenarioLight

    @property
    def validation_schema(self) -> type[ScenarioValidation]:
        return ScenarioValidation

    @property
    def safety_schema(self) -> type[BaseModel]:
        return TestAssessment

    def aggregate(
        self, files: Sequence[Path], taxonomy: Taxonomy | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        from kora.benchmarks.v1.aggregate import aggregate

        return aggregate(files, taxonomy)

    def check_scores(self, scores: Sequence[Mapping[str, object]]) -> None:
        RunResult.model_validate({"scores": scores})

    def tallies(self, scores: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int, int]]:
        al = sum(int(s["sums"]["al"]) for s in scores)
        out = {}
        for c, k in SUMS_KEYS.items():
            f = sum(int(s["sums"][k][0]) for s in scores)
            e = sum(int(s["sums"][k][2]) for s in scores)
            out[c] = (f, e, al)
        return out

    def judge_showcase(
        self, scenario: Scenario, taxonomy: Taxonomy, transcript: str
    ) -> list[Rendered]:
        from kora.benchmarks.v1.judge import behavior_question

        prompt = behavior_question(scenario, transcript)
        return [Rendered("judge_behavior", prompt, BehaviorAssessment)]

    @property
    def rendered_intro(self) -> str:
        return (
            "# Rendered prompts\n\n"
            "Every prompt of the benchmark, rendered by `kora prompts` for one scenario, with "
            "the JSON schema sent with each structured call (the field descriptions in it "
            "reach the model). Sections named `[...]` show variants this scenario does not "
            "itself use. Regenerate with `kora prompts docs/example-scenario.json -o "
            "docs/rendered-prompts.md --force`; `docs/fidelity.md` maps every fact of the reference "
            "prompts to these sections.\n"
        )

    @property
    def judging(self) -> Judging:
        from kora.benchmarks.v1.judge import judge_conversation

        return judge_conversation


BENCHMARK = V1()
