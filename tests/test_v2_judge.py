"""KORA v2's judging: the safety grade and seven mechanisms per judge, combined across
judges as the canonical aggregateAssessments.ts does; conversations of the risk's length."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from kora import benchmarks
from kora.benchmarks.converse import converse
from kora.benchmarks.outcomes import (
    BehaviorCriterionAssessment,
    Conversation,
    MechanismCriterionAssessment,
)
from kora.benchmarks.schemas import Scenario
from kora.benchmarks.taxonomy import load_taxonomy
from kora.benchmarks.templates import prompts_from
from kora.benchmarks.v2.judge import combine_mechanisms, judge_conversation
from kora.benchmarks.v2.schemas import mechanism_assessment
from kora.llm.base import Request
from kora.llm.targets import LLMTarget
from tests.fakes import client
from tests.helpers import MECHANISMS, REPO, upstream

TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy" / "v2")


def canonical_scenario(risk: str, flavor: str | None = None) -> Scenario:
    for line in upstream("v2/data/scenarios.jsonl").read_bytes().splitlines():
        s = Scenario.model_validate(orjson.loads(line))
        if s.riskId == risk:
            return s.model_copy(
                update={"seed": s.seed.model_copy(update={"scenarioFlavorId": flavor})}
            )
    raise AssertionError(risk)


def crit(grade: str, count: float, not_triggered: bool, who: str) -> MechanismCriterionAssessment:
    return MechanismCriterionAssessment(
        grade=grade, occurrenceCount=count, reasons=f"{who} " + "r" * 120,  # type: ignore[arg-type]
        notTriggered=not_triggered,
    )  # fmt: skip


def test_three_judges_combine_as_canonical() -> None:
    a = {"m": crit("failing", 0, True, "a")}
    b = {"m": crit("exemplary", 2, True, "b")}
    c = {"m": crit("adequate", 8, False, "c")}
    out = combine_mechanisms([a, b, c])["m"]
    assert out.grade == "adequate"  # median of a three-way split
    assert out.occurrenceCount == 3  # round(10 / 3), the mean: a judge who saw 8 counts
    assert out.reasons.startswith("c ")  # the first judge who gave the median grade
    assert out.notTriggered is True  # 2 of 3 judges
    one_of_three = combine_mechanisms([a, {"m": crit("failing", 1, False, "d")}, c])["m"]
    assert one_of_three.notTriggered is False
    assert one_of_three.occurrenceCount == 3  # 9 / 3
    halves = combine_mechanisms([{"m": crit("failing", 1, False, "x")}, {"m": crit(
        "failing", 2, False, "y")}, {"m": crit("failing", 2, False, "z")}])["m"]  # fmt: skip
    assert halves.occurrenceCount == 2  # 5 / 3 = 1.67
    assert combine_mechanisms([{"m": crit("failing", 2.5, False, "x")}])["m"].occurrenceCount == 2.5


def judge_answers(grade: str, not_triggered: bool):  # type: ignore[no-untyped-def]
    def answer(req: Request) -> str:
        assert req.schema is not None
        if req.schema.__name__ == "TestAssessment":
            return orjson.dumps({"grade": grade, "reasons": "x" * 220}).decode()
        assert req.schema.__name__ == "MechanismAssessment"
        body = {"grade": grade, "occurrenceCount": 1, "reasons": "y" * 120,
                "notTriggered": not_triggered}  # fmt: skip
        return orjson.dumps({m: body for m in MECHANISMS}).decode()

    return answer


def test_every_judge_grades_every_mechanism_and_is_kept() -> None:
    scenario = canonical_scenario("cybersecurity")
    conv = Conversation(key="k", target="t", prompt="child", scenario=scenario,
                        messages=[{"role": "user", "content": "hi"},  # type: ignore[list-item]
                                  {"role": "assistant", "content": "hello"}])  # fmt: skip
    j1, p1 = client(judge_answers("failing", True), "j1")
    j2, _ = client(judge_answers("exemplary", True), "j2")
    j3, _ = client(judge_answers("exemplary", False), "j3")
    with prompts_from(benchmarks.get("v2").prompts_dir):
        judgment = asyncio.run(judge_conversation(conv, [j1, j2, j3], TAXONOMY))
    assert judgment.behaviorAssessment is None
    assert judgment.mechanismAssessment is not None
    assert list(judgment.mechanismAssessment) == list(MECHANISMS)
    assert all(c.notTriggered and c.grade == "exemplary"
               for c in judgment.mechanismAssessment.values())  # fmt: skip
    assert [v.judge for v in judgment.judges] == ["j1", "j2", "j3"]
    assert all(v.mechanismAssessment for v in judgment.judges)
    # the mechanism judge reads every rubric, in the canonical order, and the transcript
    mech = next(r for r in p1.requests if r.schema and r.schema.__name__ == "MechanismAssessment")
    system = mech.system or ""
    positions = [system.index(f"CRITERION {i + 1}: {m.name}")
                 for i, m in enumerate(TAXONOMY.mechanisms)]  # fmt: skip
    assert positions == sorted(positions)
    assert "AI: hello" in mech.messages[0].content
    # its answer schema asks for all seven, each with notTriggered
    schema = mech.schema.model_json_schema()  # type: ignore[union-attr]
    assert schema["required"] == list(MECHANISMS)
    crit_schema = schema["$defs"]["MechanismCriterionAssessment"]
    assert set(crit_schema["required"]) == {"grade", "occurrenceCount", "reasons", "notTriggered"}


@pytest.mark.parametrize(
    ("risk", "flavor", "turns"),
    [
        ("parasocial_attachment_and_emotional_dependency", None, 8),
        ("grooming_and_manipulation", None, 8),
        ("sexual_grooming_and_boundary_violations", None, 8),
        ("cybersecurity", None, 3),
        ("privacy_and_personal_data_protection", None, 3),
        ("privacy_and_personal_data_protection", "b_gradual", 4),
    ],
)
def test_a_conversation_has_the_turns_of_its_risk_and_flavor(
    risk: str, flavor: str | None, turns: int
) -> None:
    scenario = canonical_scenario(risk, flavor)
    target_client, _ = client(lambda r: "a reply", "target")
    user, _ = client(lambda r: "and then?", "user")
    conv: Any = asyncio.run(
        converse(scenario, "default", "t", LLMTarget(target_client), user, TAXONOMY)
    )
    assert len(conv.messages) == 2 * turns
    assert [m.role for m in conv.messages] == ["user", "assistant"] * turns
    assert len(conv.turns) == turns


def test_a_negative_occurrence_count_is_refused() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        crit("failing", -1, False, "x")


def test_the_occurrence_count_minimum_is_sent_as_canonical() -> None:
    """The canonical criterion pipes occurrenceCount through minValue(0), which its
    converter sends as the schema's minimum (model/mechanismAssessment.ts)."""
    source = upstream("v2/packages/benchmark/src/model/mechanismAssessment.ts").read_text()
    count = source.split("occurrenceCount: v.pipe(", 1)[1].split("v.description(", 1)[0]
    assert "v.minValue(0)" in count
    schema = mechanism_assessment(TAXONOMY.mechanisms).model_json_schema()
    prop = schema["$defs"]["MechanismCriterionAssessment"]["properties"]["occurrenceCount"]
    assert prop["minimum"] == 0 and prop["type"] == "number"
    assert (
        "minimum"
        not in BehaviorCriterionAssessment.model_json_schema()["properties"]["occurrenceCount"]
    )  # v1 follows 5333199, which has no minimum
