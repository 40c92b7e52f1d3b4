from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from kora.benchmarks.outcomes import (
    BehaviorAssessment,
    BehaviorCriterionAssessment,
    Message,
    TestAssessment,
)
from kora.benchmarks.schemas import (
    ModelScenarioLight,
    ModelScenarioSeed,
    ModelScenarioWithMemory,
    PromptVariant,
    Scenario,
    ScenarioSeed,
    Strict,
)
from tests.helpers import upstream


class ReferenceTestResult(Strict):
    """The reference per-test record (spec section 8), which kora's Judgment carries."""

    scenario: Scenario
    prompt: PromptVariant
    messages: list[Message]
    assessment: TestAssessment
    behaviorAssessment: BehaviorAssessment


def _lines(name: str) -> list[dict]:
    return [orjson.loads(line) for line in upstream(name).read_bytes().splitlines() if line.strip()]


def test_reference_seeds_load() -> None:
    seeds = [ScenarioSeed.model_validate(s) for s in _lines("scenarioSeeds.jsonl")]
    assert len(seeds) == 737
    assert {s.ageRange for s in seeds} == {"7to9", "10to12", "13to17"}


def test_reference_scenarios_load_with_ids_from_seed() -> None:
    raw = _lines("scenarios.jsonl")
    assert all("id" not in r for r in raw)  # the reference layout
    scenarios = [Scenario.model_validate(r) for r in raw]
    assert len(scenarios) == 737
    for s in scenarios:
        assert s.id == s.seed.id
        assert (s.riskCategoryId, s.riskId, s.ageRange) == (
            s.seed.riskCategoryId,
            s.seed.riskId,
            s.seed.ageRange,
        )
    with_memory = {s.riskId for s in scenarios if s.modelMemory}
    assert sum(1 for s in scenarios if s.modelMemory) == 87
    assert with_memory == {
        "sexual_grooming_and_boundary_violations",
        "grooming_and_manipulation",
        "parasocial_attachment_and_emotional_dependency",
    }


def test_shard_record_round_trips() -> None:
    s = Scenario.model_validate(_lines("scenarios.jsonl")[0])
    again = Scenario.model_validate(orjson.loads(orjson.dumps(s.shard_record())))
    assert again == s


def test_strict_records_reject_unknown_keys() -> None:
    seed = _lines("scenarioSeeds.jsonl")[0]
    with pytest.raises(ValidationError, match="surprise"):
        ScenarioSeed.model_validate({**seed, "surprise": 1})


@pytest.mark.parametrize(
    ("field", "value"),
    [("childAge", 6), ("childAge", 18), ("shortTitle", "abc"), ("coreBehavior", "x" * 301),
     ("childRaceEthnicity", "martian"), ("notes", "n" * 301)],
)  # fmt: skip
def test_seed_limits(field: str, value: object) -> None:
    seed = {k: v for k, v in _lines("scenarioSeeds.jsonl")[0].items()}
    model_fields = {k: seed[k] for k in ModelScenarioSeed.model_fields}
    ModelScenarioSeed.model_validate(model_fields)
    with pytest.raises(ValidationError, match=field):
        ModelScenarioSeed.model_validate({**model_fields, field: value})


def test_scenario_limits_follow_5333199() -> None:
    ok = {
        "shortTitle": "t" * 120,
        "childMaturity": "m" * 1000,
        "childBackground": "b" * 1000,
        "narrative": "n" * 4000,
        "evaluationCriteria": "e" * 2000,
    }
    ModelScenarioLight.model_validate(ok)
    with pytest.raises(ValidationError):
        ModelScenarioLight.model_validate({**ok, "narrative": "n" * 4001})
    with pytest.raises(ValidationError):
        ModelScenarioLight.model_validate({**ok, "narrative": "n" * 199})


def test_assessment_limits() -> None:
    TestAssessment(grade="adequate", reasons="r" * 200)
    with pytest.raises(ValidationError):
        TestAssessment(grade="adequate", reasons="r" * 199)
    with pytest.raises(ValidationError):
        TestAssessment(grade="okay", reasons="r" * 300)  # type: ignore[arg-type]
    # no lower bound on occurrenceCount (dropped in 5333199)
    BehaviorCriterionAssessment(grade="failing", occurrenceCount=-1, reasons="r" * 100)


def test_reference_test_result_shape() -> None:
    scenario = _lines("scenarios.jsonl")[0]
    crit = {"grade": "exemplary", "occurrenceCount": 0, "reasons": "r" * 120}
    ReferenceTestResult.model_validate(
        {
            "scenario": scenario,
            "prompt": "child",
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
            "assessment": {"grade": "exemplary", "reasons": "r" * 250},
            "behaviorAssessment": {
                "anthropomorphism": crit,
                "epistemicHumility": crit,
                "humanRedirection": crit,
            },
        }
    )


def test_reference_data_is_required_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ../shared/upstream a test skips locally but fails under CI."""
    import _pytest.outcomes

    from tests import helpers

    monkeypatch.setattr(helpers, "UPSTREAM", Path("/nonexistent-upstream"))
    monkeypatch.setenv("CI", "")
    with pytest.raises(_pytest.outcomes.Skipped):
        helpers.upstream("scenarios.jsonl")
    monkeypatch.setenv("CI", "1")
    with pytest.raises(_pytest.outcomes.Failed, match="CI is set"):
        helpers.upstream("scenarios.jsonl")


def reference_described(source: str, name: str) -> dict[str, bool]:
    """The fields of the reference's `V<name>` object, each with whether its pipe carries
    a `v.description` (the text its JSON-schema converter sends to the model)."""
    block = source.split(f"const V{name} = v.strictObject({{", 1)[1].split("\n});", 1)[0]
    parts = re.split(r"\n {2}(\w+): ", block)[1:]
    fields, bodies = parts[::2], parts[1::2]
    return {field: "v.description(" in body for field, body in zip(fields, bodies, strict=True)}


def test_criterion_descriptions_are_sent_once_each_as_in_the_reference() -> None:
    """The reference describes each of the three criteria (behaviorAssessment.ts:30-47) and
    each field of a criterion; its converter writes a criterion's description on the
    criterion object it inlines. Pydantic shares the criterion's definition and writes the
    same text beside each `$ref` to it: once per criterion, none on the shared definition."""
    source = upstream("v1-source/model/behaviorAssessment.ts").read_text()
    schema = BehaviorAssessment.model_json_schema()
    properties = schema["properties"]
    assert (
        reference_described(source, "BehaviorAssessment")
        == {field: "description" in prop for field, prop in properties.items()}
        == dict.fromkeys(("anthropomorphism", "epistemicHumility", "humanRedirection"), True)
    )
    assert all(set(prop) == {"$ref", "description"} for prop in properties.values())
    criterion = schema["$defs"]["BehaviorCriterionAssessment"]
    assert "description" not in criterion
    assert (
        reference_described(source, "BehaviorCriterionAssessment")
        == {field: "description" in prop for field, prop in criterion["properties"].items()}
        == dict.fromkeys(("grade", "occurrenceCount", "reasons"), True)
    )


def test_model_memory_description_is_what_the_ai_would_know() -> None:
    """The memory is what the assistant would know of the user (scenario.ts:16), not
    everything it knows: a description claiming completeness asks for a fuller memory."""
    source = upstream("v1-source/model/scenario.ts").read_text()
    opening = "What the AI assistant would know"
    assert f'description:\n      "{opening}' in source
    ours = ModelScenarioWithMemory.model_json_schema()["properties"]["modelMemory"]["description"]
    assert ours.startswith(f"{opening} of this user")
    assert not {"everything", "all", "complete"} & set(re.findall(r"[a-z]+", ours.lower()))
