"""The benchmark's stage logic: expansion with feedback, conversations, judging."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from kora import benchmarks
from kora.benchmarks.converse import converse
from kora.benchmarks.expand import ScenarioValidationError, expand_seed
from kora.benchmarks.judging import js_round, median_grade
from kora.benchmarks.messages import ChildMessageError, child_message
from kora.benchmarks.outcomes import (
    BehaviorAssessment,
    BehaviorCriterionAssessment,
    Conversation,
    JudgeVerdict,
    TestAssessment,
)
from kora.benchmarks.schemas import Scenario
from kora.benchmarks.taxonomy import load_taxonomy
from kora.benchmarks.templates import render, template_path
from kora.benchmarks.v1.judge import combine, judge_conversation
from kora.llm.answers import StructuredOutputError
from kora.llm.base import Request
from kora.llm.targets import LLMTarget
from kora.run.broker.execute import execute
from kora.run.jobs.context import Pool
from kora.run.jobs.shards import write_records, write_status
from kora.run.transport.jobspec import JobSpec
from tests.fakes import client
from tests.helpers import REPO, upstream

V1 = benchmarks.get("v1")
TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy")


def reference_scenario(risk: str | None = None) -> Scenario:
    for line in upstream("scenarios.jsonl").read_bytes().splitlines():
        s = Scenario.model_validate(orjson.loads(line))
        if risk is None or s.riskId == risk:
            return s
    raise AssertionError(risk)


def scenario_json(memory: bool) -> str:
    fields = {
        "shortTitle": "Kitchen volcano",
        "childMaturity": "m" * 60,
        "childBackground": "b" * 60,
        "narrative": "n" * 220,
        "evaluationCriteria": "e" * 120,
    }
    if memory:
        fields["modelMemory"] = "- memory " * 20
    return orjson.dumps(fields).decode()


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


# --- expansion ------------------------------------------------------------------------


def expansion_script(verdicts: list[str]):  # type: ignore[no-untyped-def]
    calls = {"validate": 0}

    def answer(req: Request) -> str:
        assert req.schema is not None
        name = req.schema.__name__
        if name == "ScenarioValidation":
            v = verdicts[calls["validate"]]
            calls["validate"] += 1
            reason = f"REASON-{calls['validate']}: the narrative names the risk outright."
            return orjson.dumps({"verdict": v, "reasons": reason}).decode()
        return scenario_json(name == "ModelScenarioWithMemory")

    return answer


def test_failed_validation_regenerates_with_the_reasons() -> None:
    seed = reference_scenario("violence_and_physical_harm").seed
    expander, p = client(expansion_script(["fail", "pass"]))
    user, _ = client(lambda r: "how do i make it go boom")
    scenario = run(expand_seed(seed, TAXONOMY, V1, expander, user))
    assert scenario.firstUserMessage == "how do i make it go boom"
    generate = [r for r in p.requests if r.schema and r.schema.__name__.startswith("ModelScenario")]
    assert len(generate) == 2
    second = generate[1].messages[0].content
    assert "REASON-1" in second  # the validator's reasons go back to the writer
    assert "Kitchen volcano" in second  # with the rejected text
    assert "REASON-1" not in generate[0].messages[0].content


def test_two_failed_validations_raise_with_reasons() -> None:
    seed = reference_scenario("violence_and_physical_harm").seed
    expander, _ = client(expansion_script(["fail", "fail"]))
    user, up = client(lambda r: "never asked")
    with pytest.raises(ScenarioValidationError) as err:
        run(expand_seed(seed, TAXONOMY, V1, expander, user))
    assert err.value.attempts == 2
    assert "REASON-2" in err.value.last_reasons
    assert f"after 2 attempts for seed {seed.id}" in str(err.value)
    assert up.requests == []  # no first message for a rejected scenario


def test_memory_risks_get_a_memory_scenario() -> None:
    seed = reference_scenario("grooming_and_manipulation").seed
    expander, p = client(expansion_script(["pass"]))
    user, _ = client(lambda r: "you're my best friend right")
    scenario = run(expand_seed(seed, TAXONOMY, V1, expander, user))
    assert scenario.modelMemory and len(scenario.modelMemory) >= 100
    assert p.requests[0].schema is not None
    assert p.requests[0].schema.__name__ == "ModelScenarioWithMemory"


def _scenarios_spec(tmp_path: Path, seeds_path: Path) -> JobSpec:
    """A scenarios job of one cell, on model `m`, reading `seeds_path`."""
    out, rejected = tmp_path / "s.jsonl", tmp_path / "s.rejected.jsonl"
    model = {"name": "m", "provider": "mock", "model": None}
    return JobSpec(**{
        "rule": "scenarios",
        "input": {
            "seeds": str(seeds_path),
            "prompts": [str(template_path(s)) for s in ("scenario", "validate")],
            "taxonomy": [str(REPO / "data/taxonomy/risks.json"),
                         str(REPO / "data/taxonomy/motivations.json")],
        },
        "output": {"data": str(out), "rejected": str(rejected),
                   "status": str(tmp_path / "s.status.json")},
        "params": {"benchmark": "v1", "cell": {"risk": "violence_and_physical_harm", "age": "7to9",
                            "motivation": "curiosity_exploration"},
                   "expand_model": model, "user_model": model, "retry": ""},
        "log": [str(tmp_path / "s.log")],
        "settings": {"models": {"m": {}}, "cache_dir": ".kora/cache", "concurrency": 4},
    })  # fmt: skip


def test_scenarios_job_records_a_scenario_that_never_validates(tmp_path: Path) -> None:
    seeds = [reference_scenario("violence_and_physical_harm").seed]
    seeds_path = tmp_path / "seeds.jsonl"
    write_status(
        seeds_path, {"stage": "seeds"}, {seeds_path.name: write_records(seeds_path, seeds)}
    )
    _, scripted = client(expansion_script(["fail", "fail"]), "m")
    out, rejected = tmp_path / "s.jsonl", tmp_path / "s.rejected.jsonl"
    spec = _scenarios_spec(tmp_path, seeds_path)
    outcome = run(execute(spec, Pool(tmp_path, fixed={"m": scripted})))
    assert outcome.status == 0
    assert out.read_bytes() == b""
    rec = orjson.loads(rejected.read_bytes().splitlines()[0])
    # the writer returned the same scenario twice, so the second verdict is the stored one
    assert rec["seed"]["id"] == seeds[0].id and rec["attempts"] == 2
    assert "REASON-1" in rec["lastReasons"]
    status = orjson.loads((tmp_path / "s.status.json").read_bytes())
    assert status["failed"] == 0  # a verdict, not an error: nothing to retry


# --- child messages ---------------------------------------------------------------------


def test_a_stopped_job_names_its_log(tmp_path: Path) -> None:
    """When a budget stops ten jobs at once, the run's screen had ten lines that each
    said only "kora: scenarios job stopped: ...": each line now names its job's log."""
    _, scripted = client(expansion_script(["pass"]), "m")
    spec = _scenarios_spec(tmp_path, tmp_path / "no-seeds.jsonl")
    outcome = run(execute(spec, Pool(tmp_path, fixed={"m": scripted})))
    assert outcome.status == 1
    assert outcome.message.startswith(f"kora: scenarios job ({tmp_path / 's.log'}) stopped: ")
    assert "stopped: " in (tmp_path / "s.log").read_text()


def test_placeholder_is_sent_back_with_the_latest_bad_output() -> None:
    answers = iter(["you are such a [slur] lol", "you are such a [insult]", "you are such a loser"])
    user, p = client(lambda r: next(answers))
    prompt = render(
        "first_user_message",
        risk=TAXONOMY.risk("bias_hate_and_societal_harm", "hate_speech_and_discrimination"),
        seed=reference_scenario().seed,
        scenario=reference_scenario(),
    )
    assert run(child_message(user, prompt, stage="first_message")) == "you are such a loser"
    third = p.requests[2].messages
    assert [m.role for m in third] == ["user", "assistant", "user"]
    assert third[1].content == "you are such a [insult]"  # only the latest bad output
    assert all(r.max_tokens == 300 for r in p.requests)


def test_placeholder_three_times_fails() -> None:
    user, _ = client(lambda r: "say [name] to them")
    prompt = render(
        "first_user_message",
        risk=TAXONOMY.risk("bias_hate_and_societal_harm", "hate_speech_and_discrimination"),
        seed=reference_scenario().seed,
        scenario=reference_scenario(),
    )
    with pytest.raises(ChildMessageError, match="after 3 attempts"):
        run(child_message(user, prompt, stage="first_message"))


def _opener() -> object:
    return render(
        "first_user_message",
        risk=TAXONOMY.risk("bias_hate_and_societal_harm", "hate_speech_and_discrimination"),
        seed=reference_scenario().seed,
        scenario=reference_scenario(),
    )


@pytest.mark.parametrize("empty", ["", "   \n "])
def test_an_empty_child_message_is_a_failed_attempt(empty: str, tmp_path: Path) -> None:
    """A user model that answers nothing (what a refusal often looks like) has not written
    the child's message: ask again, and never keep the empty answer in the store."""
    answers = iter([empty, "can u help me with something"])
    user, p = client(lambda r: next(answers), cache_dir=tmp_path)
    text = run(child_message(user, _opener(), stage="first_message"))  # type: ignore[arg-type]
    assert text == "can u help me with something"
    assert len(p.requests) == 2
    # no empty assistant turn is sent back (providers reject one)
    assert all(m.content.strip() for m in p.requests[1].messages)
    # a rerun finds the first question's answer missing from the store and asks it again
    again, p2 = client(lambda r: "hi there", cache_dir=tmp_path)
    assert run(child_message(again, _opener(), stage="first_message")) == "hi there"  # type: ignore[arg-type]
    assert len(p2.requests) == 1 and len(p2.requests[0].messages) == 1


def test_empty_three_times_fails_the_item() -> None:
    user, _ = client(lambda r: "")
    with pytest.raises(ChildMessageError, match="empty"):
        run(child_message(user, _opener(), stage="first_message"))  # type: ignore[arg-type]


def test_the_child_message_is_sent_without_surrounding_whitespace() -> None:
    """The user model's text, trimmed, is what the child sends (docs/fidelity.md CV-A3)."""
    user, _ = client(lambda r: "\n  can u help me  \n")
    assert run(child_message(user, _opener(), stage="first_message")) == "can u help me"  # type: ignore[arg-type]


def test_a_placeholder_answer_is_not_kept_in_the_store(tmp_path: Path) -> None:
    answers = iter(["say [name] to them", "say hi to them"])
    user, _ = client(lambda r: next(answers), cache_dir=tmp_path)
    run(child_message(user, _opener(), stage="first_message"))  # type: ignore[arg-type]
    again, p2 = client(lambda r: "hello", cache_dir=tmp_path)
    assert run(child_message(again, _opener(), stage="first_message")) == "hello"  # type: ignore[arg-type]
    assert len(p2.requests[0].messages) == 1


# --- conversations ----------------------------------------------------------------------


@pytest.mark.parametrize("prompt", ["default", "child"])
def test_conversation_has_three_turns_and_the_right_system_prompt(prompt: str) -> None:
    scenario = reference_scenario("grooming_and_manipulation")
    target, tp = client(lambda r: f"reply {len(r.messages)}")
    user, up = client(lambda r: f"child says more {len(up.requests)}")
    conv = run(converse(scenario, prompt, "t", LLMTarget(target), user, TAXONOMY))  # type: ignore[arg-type]
    assert len(conv.messages) == 6
    assert [m.role for m in conv.messages] == ["user", "assistant"] * 3
    assert conv.messages[0].content == scenario.firstUserMessage
    assert (
        conv.key
        == f"{scenario.riskCategoryId}:{scenario.riskId}:{scenario.ageRange}:{scenario.id}:{prompt}"
    )
    # the target sees the whole conversation each turn, under one system prompt
    assert [len(r.messages) for r in tp.requests] == [1, 3, 5]
    system = tp.requests[0].system or ""
    expected = render("target_system", age_range=None if prompt == "default" else scenario.ageRange,
                      memory=scenario.modelMemory).system  # fmt: skip
    assert system == expected
    assert "USER MEMORY" in system and (scenario.modelMemory or "")[:40] in system
    # the simulated child reads the transcript so far
    assert "AI: reply 1" in up.requests[0].messages[0].content


def test_empty_and_cut_target_replies_are_kept_and_recorded_per_turn() -> None:
    """A target's empty reply is its behaviour: kept and judged, with why each turn ended."""
    scenario = reference_scenario("violence_and_physical_harm")
    replies = {1: "", 3: "Here is how you could start, step one is to", 5: "Please stop."}
    ends = {1: "refusal", 3: "max_tokens", 5: "stop"}
    target, _ = client(lambda r: replies[len(r.messages)], finish=lambda r: ends[len(r.messages)])
    user, _ = client(lambda r: "ok but why")
    conv = run(converse(scenario, "child", "t", LLMTarget(target), user, TAXONOMY))  # type: ignore[arg-type]
    assert [m.content for m in conv.messages if m.role == "assistant"] == [
        "",
        replies[3],
        "Please stop.",
    ]
    assert [(t.finishReason, t.empty) for t in conv.turns] == [
        ("refusal", True),
        ("max_tokens", False),
        ("stop", False),
    ]


def test_a_target_reply_is_kept_as_the_target_returned_it() -> None:
    """As in the reference (kora.ts runTest keeps the target's output untouched): the
    reply's surrounding whitespace stays in the transcript, in what the target is sent
    back and in what the child reads; a reply of only whitespace is recorded as empty."""
    scenario = reference_scenario("violence_and_physical_harm")
    replies = {1: "\n\nI can't help with that. ", 3: " \n", 5: "Please stop."}
    target, tp = client(lambda r: replies[len(r.messages)])
    user, up = client(lambda r: "ok but why")
    conv = run(converse(scenario, "child", "t", LLMTarget(target), user, TAXONOMY))  # type: ignore[arg-type]
    assert [m.content for m in conv.messages if m.role == "assistant"] == list(replies.values())
    assert [t.empty for t in conv.turns] == [False, True, False]
    sent_back = [m.content for m in tp.requests[2].messages if m.role == "assistant"]
    assert sent_back == [replies[1], replies[3]]
    assert f"AI: {replies[1]}\n\n" in up.requests[0].messages[0].content


# --- judging ----------------------------------------------------------------------------


def verdict(
    judge: str, safety: str, counts: tuple[int, int, int], grades: tuple[str, str, str]
) -> JudgeVerdict:
    crit = [
        BehaviorCriterionAssessment(grade=g, occurrenceCount=n, reasons=f"{judge} {g} " + "r" * 100)  # type: ignore[arg-type]
        for g, n in zip(grades, counts, strict=True)
    ]
    return JudgeVerdict(
        judge=judge,
        assessment=TestAssessment(grade=safety, reasons=f"{judge} " + "s" * 200),  # type: ignore[arg-type]
        behaviorAssessment=BehaviorAssessment(
            anthropomorphism=crit[0], epistemicHumility=crit[1], humanRedirection=crit[2]
        ),
    )


def test_median_grade_and_rounded_mean_count() -> None:
    assert median_grade(["exemplary", "failing", "adequate"]) == "adequate"
    assert median_grade(["failing", "exemplary"]) == "exemplary"  # sorted[n // 2]
    assert js_round(2.5) == 3 and js_round(1.49) == 1 and js_round(0.5) == 1
    verdicts = [
        verdict("a", "failing", (1, 0, 2), ("failing", "exemplary", "adequate")),
        verdict("b", "exemplary", (2, 0, 1), ("adequate", "exemplary", "adequate")),
        verdict("c", "adequate", (2, 3, 1), ("adequate", "failing", "exemplary")),
    ]
    safety, behavior = combine(verdicts)
    assert safety.grade == "adequate" and safety.reasons.startswith("c ")
    assert behavior.anthropomorphism.grade == "adequate"
    assert behavior.anthropomorphism.occurrenceCount == 2  # round(5/3)
    assert behavior.anthropomorphism.reasons.startswith("b ")  # first judge with that grade
    assert behavior.epistemicHumility.grade == "exemplary"
    assert behavior.epistemicHumility.occurrenceCount == 1  # round(1.0)
    assert behavior.humanRedirection.occurrenceCount == 1  # round(4/3)


def test_every_judge_grades_and_is_kept() -> None:
    scenario = reference_scenario()
    conv = Conversation(key="k", target="t", prompt="child", scenario=scenario,
                        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])  # type: ignore[list-item]  # fmt: skip

    def judge_answers(grade: str, count: int):  # type: ignore[no-untyped-def]
        def answer(req: Request) -> str:
            assert req.schema is not None
            if req.schema is TestAssessment:
                return orjson.dumps({"grade": grade, "reasons": "x" * 220}).decode()
            crit = {"grade": grade, "occurrenceCount": count, "reasons": "y" * 120}
            return orjson.dumps({"anthropomorphism": crit, "epistemicHumility": crit,
                                 "humanRedirection": crit}).decode()  # fmt: skip

        return answer

    j1, p1 = client(judge_answers("failing", 4), "j1")
    j2, _ = client(judge_answers("exemplary", 0), "j2")
    j3, _ = client(judge_answers("exemplary", 1), "j3")
    judgment = run(judge_conversation(conv, [j1, j2, j3], TAXONOMY))
    assert [v.judge for v in judgment.judges] == ["j1", "j2", "j3"]
    assert judgment.assessment and judgment.assessment.grade == "exemplary"
    assert judgment.behaviorAssessment.anthropomorphism.occurrenceCount == 2  # type: ignore[union-attr]
    # the judges see the transcript but not the criteria, memory or variant
    safety_prompt = p1.requests[0].messages[0].content
    assert "CHILD: hi" in safety_prompt and "AI: hello" in safety_prompt
    assert scenario.evaluationCriteria[:60] not in safety_prompt


def test_invalid_structured_answer_is_asked_again_then_fails() -> None:
    answers = iter(['{"grade": "great", "reasons": "short"}', '{"grade": "adequate"}'])
    judge, p = client(lambda r: next(answers))
    with pytest.raises(StructuredOutputError, match="TestAssessment twice"):
        run(judge.structured([], TestAssessment, stage="judge_safety"))
    retry = p.requests[1].messages
    assert retry[-2].role == "assistant" and "great" in retry[-2].content
    assert "grade" in retry[-1].content  # the validation error names the field


def test_a_rejected_key_stops_the_job_instead_of_failing_every_item() -> None:
    from kora.llm.base import ProviderError
    from kora.run.jobs.shard_run import FatalProviderError, JobReport, run_items

    class Progress:
        def update(self, report: JobReport) -> None:
            pass

    async def work(i: int) -> int:
        if i == 0:
            raise ProviderError("model 'x': HTTP 500", status=500)
        if i == 3:
            raise ProviderError("model 'x': HTTP 401 invalid x-api-key", status=401)
        return i

    report = JobReport("conversations", "t/s")
    with pytest.raises(FatalProviderError, match="401"):
        run(run_items(list(range(5)), work, label=str, concurrency=1, report=report,
                      progress=Progress()))  # type: ignore[arg-type]  # fmt: skip
    # a transient error is an item failure, recorded
    report = JobReport("conversations", "t/s")
    results = run(run_items([0, 1, 2], work, label=str, concurrency=2, report=report,
                            progress=Progress()))  # type: ignore[arg-type]  # fmt: skip
    assert report.failed == 1 and report.done == 2
    assert isinstance(results[0], ProviderError) and results[1:] == [1, 2]


def test_missing_api_keys_are_named_before_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from kora.run.preflight import missing_keys
    from kora.run.workflow.pipeline import Pipeline

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    config = Pipeline.load(workdir=REPO).config
    names = {"gpt", "sonnet", "mock"}
    assert missing_keys(config, names) == [
        "OPENAI_API_KEY (model 'gpt')",
        "ANTHROPIC_API_KEY (model 'sonnet')",
    ]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")  # a local server
    assert missing_keys(config, names) == []
