"""`kora continue`: recorded conversations carried on to each risk's length and judged,
asking only the turns they lack."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kora import benchmarks
from kora.benchmarks.converse import converse
from kora.benchmarks.layout import Layout
from kora.benchmarks.outcomes import Conversation, Message
from kora.benchmarks.schemas import Scenario
from kora.benchmarks.taxonomy import load_taxonomy
from kora.config.checks import validate_config
from kora.errors import ConfigError, InputError
from kora.llm.base import Request
from kora.llm.targets import LLMTarget
from kora.run.continuation import stage_recordings
from tests.fakes import client
from tests.helpers import REPO, copy_workflow, upstream
from tests.loopback import Servers
from tests.workflows import Server, loopback_env, snakemake, structured_answer

V2 = load_taxonomy(REPO / "data" / "taxonomy" / "v2")
V2_LAYOUT = Layout.of(benchmarks.get("v2"))
GROOMING = "sexual_grooming_and_boundary_violations"  # 8 turns in v2


def canonical(risk: str, n: int = 1, age: str | None = None) -> list[Scenario]:
    out = []
    for line in upstream("v2/data/scenarios.jsonl").read_bytes().splitlines():
        s = Scenario.model_validate(orjson.loads(line))
        if s.riskId == risk and not s.seed.scenarioFlavorId and age in (None, s.ageRange):
            out.append(s)
            if len(out) == n:
                break
    return out


def recorded_turns(scenario: Scenario, turns: int) -> list[Message]:
    messages = [Message(role="user", content=scenario.firstUserMessage)]
    for i in range(turns):
        if i:
            messages.append(Message(role="user", content=f"recorded child line {i + 1}"))
        messages.append(Message(role="assistant", content=f"recorded reply {i + 1}"))
    return messages


def record(scenario: Scenario, turns: int, model: str = "t1", prompt: str = "default") -> Any:
    return {
        "id": f"{scenario.id}:{prompt}",
        "modelId": model,
        "scenario": orjson.loads(orjson.dumps(scenario.model_dump(mode="json", exclude_none=True))),
        "prompt": prompt,
        "messages": [m.model_dump() for m in recorded_turns(scenario, turns)],
    }


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


# --- carrying one conversation on ---------------------------------------------------------


def test_a_three_turn_recording_gets_only_the_five_turns_it_lacks() -> None:
    (scenario,) = canonical(GROOMING)
    start = recorded_turns(scenario, 3)
    user, up = client(lambda r: "so what do we do next", "user")
    tgt, tp = client(lambda r: "a new reply", "target")
    conv = asyncio.run(converse(scenario, "default", "t1", LLMTarget(tgt), user, V2, start))
    assert len(conv.messages) == 16
    assert conv.messages[:6] == start  # the recording, as it was
    assert len(up.requests) == 5 and len(tp.requests) == 5
    assert conv.recordedTurns == 3
    assert len(conv.turns) == 8  # one per reply, the recorded ones with what is known
    # the target is sent the whole recorded conversation before its first new reply
    first: Request = tp.requests[0]
    assert [m.content for m in first.messages[:6]] == [m.content for m in start]


def test_a_recording_already_as_long_as_its_risk_asks_nothing() -> None:
    (scenario,) = canonical("violence_and_physical_harm")
    start = recorded_turns(scenario, 3)
    user, up = client(lambda r: "never", "user")
    tgt, tp = client(lambda r: "never", "target")
    conv = asyncio.run(converse(scenario, "child", "t1", LLMTarget(tgt), user, V2, start))
    assert conv.messages == start and up.requests == [] and tp.requests == []


# --- filing the recordings ------------------------------------------------------------------


@pytest.mark.slow
def test_recordings_are_filed_per_cell_with_the_filters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groom = canonical(GROOMING, 3)
    other = canonical("violence_and_physical_harm", 1)
    src = write_jsonl(
        tmp_path / "rec.jsonl",
        [*(record(s, 3) for s in groom), record(other[0], 3), record(groom[0], 3, model="t2")],
    )
    monkeypatch.chdir(tmp_path)  # the recordings are filed in the current folder
    counts = stage_recordings(
        src, V2, V2_LAYOUT, risk_ids=[GROOMING], target_models=["t1"], limit_per_risk=2
    )
    assert counts == {"t1": 2}
    filed = [
        Conversation.model_validate(orjson.loads(line))
        for f in (tmp_path / "results-v2/t1/recorded").rglob("*.jsonl")
        for line in f.read_bytes().splitlines()
    ]
    assert {c.scenario.riskId for c in filed} == {GROOMING} and len(filed) == 2
    manifest = orjson.loads((tmp_path / "results-v2/t1/recorded/RECORDED.json").read_bytes())
    assert manifest["conversations"] == 2 and len(manifest["sha256"]) == 64
    with pytest.raises(InputError, match="has only 3 recorded"):
        stage_recordings(src, V2, V2_LAYOUT, risk_ids=[GROOMING], limit_per_risk=4)


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (-1, "a recorded conversation must end with the target's reply"),
        (None, "message 2 is from 'user'"),
    ],
)
def test_a_recording_that_is_not_whole_turns_is_refused_naming_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: int | None, message: str
) -> None:
    monkeypatch.chdir(tmp_path)  # the recordings are filed in the current folder
    (scenario,) = canonical(GROOMING)
    bad = record(scenario, 2)
    if cut is None:
        bad["messages"][1]["role"] = "user"
    else:
        bad["messages"] = bad["messages"][:cut]
    src = write_jsonl(
        tmp_path / "rec.jsonl", [record(canonical("violence_and_physical_harm")[0], 3), bad]
    )
    with pytest.raises(InputError, match=rf"rec\.jsonl:2: field messages: {message}"):
        stage_recordings(src, V2, V2_LAYOUT)
    assert not (tmp_path / "results").exists()  # nothing filed


# --- config ---------------------------------------------------------------------------------


def raw(target: dict[str, Any], **models: Any) -> dict[str, Any]:
    return {
        "benchmark": "v2",
        "models": {"m": {"provider": "mock"}, **models},
        "seed_model": "m",
        "expand_model": "m",
        "user_model": "m",
        "judges": ["m"],
        "targets": {"t1": target},
    }


@pytest.mark.parametrize(
    ("target", "models", "message"),
    [
        ({"continued": True}, {}, "targets.t1: missing required key 'model' the model the"),
        ({"model": "m", "continued": True, "imported": True}, {}, "set one of them"),
        (
            {"model": "bot", "continued": True},
            {"bot": {"provider": "chat-endpoint", "base_url": "http://127.0.0.1:9"}},
            "keeps each conversation on its side",
        ),
        (
            {"model": "svc", "continued": True},
            {
                "svc": {
                    "provider": "http",
                    "base_url": "http://127.0.0.1:9",
                    "http": {
                        "turn": {
                            "url": "/chat",
                            "body": {"text": "{{ message }}"},
                            "reply": "reply",
                        }
                    },
                }
            },
            "sends only the newest message",
        ),
    ],
)
def test_a_target_that_cannot_carry_a_recording_on_is_refused(
    target: dict[str, Any], models: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_config(raw(target, **models), V2)


def test_a_stateless_service_sent_the_whole_conversation_can_be_continued() -> None:
    svc = {"provider": "http", "base_url": "http://127.0.0.1:9",
           "http": {"turn": {"url": "/chat", "body": {"history": "{{ messages }}"},
                             "reply": "reply"}}}  # fmt: skip
    cfg = validate_config(raw({"model": "svc", "continued": True}, svc=svc), V2)
    assert cfg.targets["t1"].continued


# --- the workflow ---------------------------------------------------------------------------


def kora(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kora.commands.main", *args], cwd=workdir,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def plan_row(out: str, stage: str) -> list[int]:
    """items, calls, stored, to pay of one stage in `kora plan`'s table (its `repeated`
    column left out)."""
    for line in out.splitlines():
        if line.startswith(stage):
            items, calls, stored, _, to_pay = (int(x) for x in line.split()[1:6])
            return [items, calls, stored, to_pay]
    return [0, 0, 0, 0]


@pytest.mark.slow
def test_recorded_conversations_are_carried_on_and_judged_paying_only_new_turns(
    tmp_path: Path, serve: Servers
) -> None:
    server = serve(Server, structured=structured_answer)
    work = copy_workflow(tmp_path)
    groom = canonical(GROOMING, 2, age="13to17")
    short = canonical("violence_and_physical_harm", 1, age="13to17")
    write_jsonl(work / "rec.jsonl", [*(record(s, 3) for s in groom), record(short[0], 3)])
    url = server.url
    models = {
        n: {"provider": "anthropic", "model": f"claude-{n}", "base_url": url}
        for n in ("user", "judge", "t1")
    }
    cfg = {
        "benchmark": "v2",
        "models": models,
        "seed_model": "user",
        "expand_model": "user",
        "user_model": "user",
        "judges": ["judge"],
        "targets": {"t1": {"model": "t1", "continued": True, "prompts": ["default"]}},
        "grid": {"risks": [GROOMING, "violence_and_physical_harm"],
                 "age_ranges": ["13to17"]},
    }  # fmt: skip
    (work / "run.yaml").write_text(yaml.safe_dump(cfg))
    env = loopback_env()

    def run() -> subprocess.CompletedProcess[str]:
        return snakemake(work, "results-v2/t1/results.json", configfile="run.yaml", env=env)

    def calls_of_a_run() -> tuple[Counter[str], str]:
        before = len(server.requests)
        proc = run()
        assert proc.returncode == 0, proc.stderr[-4000:]
        return Counter(r.body["model"] for r in server.requests[before:]), proc.stderr

    # before the recordings are filed, the run says what to do
    proc = run()
    assert proc.returncode != 0 and "kora continue FILE --target t1" in proc.stderr
    done = kora(work, "continue", "rec.jsonl", "--configfile", "run.yaml")
    assert done.returncode == 0, done.stderr
    assert "filed 3 recorded conversations under results-v2/t1/recorded/" in done.stderr

    plan = kora(work, "plan", "t1", "--configfile", "run.yaml")
    assert plan.returncode == 0, plan.stderr
    assert plan_row(plan.stdout, "conversations") == [3, 20, 0, 20]  # 5 turns x 2, twice
    assert plan_row(plan.stdout, "seeds") == [0, 0, 0, 0]  # nothing to generate

    calls, _ = calls_of_a_run()
    # two grooming recordings lack 5 turns each; the 3-turn risk's lacks none
    assert calls["claude-t1"] == 10 and calls["claude-user"] == 10
    assert calls["claude-judge"] == 3 * 2  # each transcript, safety and mechanisms
    results = orjson.loads((work / "results-v2/t1/results.json").read_bytes())
    assert results["benchmark"] == "v2" and results["conversations"] == "continued"
    assert results["tests"] == 3 and results["failedTests"] == 0
    judged = {
        j["scenario"]["id"]: j
        for f in (work / "results-v2/t1/judgments").rglob("*.jsonl")
        for line in f.read_bytes().splitlines()
        for j in [orjson.loads(line)]
    }
    for s in groom:
        j = judged[s.id]
        assert len(j["messages"]) == 16 and j["recordedTurns"] == 3
        assert j["messages"][:6] == [m.model_dump() for m in recorded_turns(s, 3)]
    assert len(judged[short[0].id]["messages"]) == 6
    # the same command again asks nothing; the plan finds every call stored
    again, log = calls_of_a_run()
    assert not again and "Nothing to be done" in log
    plan = kora(work, "plan", "t1", "--configfile", "run.yaml")
    assert plan_row(plan.stdout, "conversations") == [3, 20, 20, 0]
