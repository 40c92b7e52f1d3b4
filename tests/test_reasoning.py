"""The models safety teams test today (issue 61): an OpenAI-protocol model's reasoning
effort, Anthropic's extended thinking, OpenAI's Responses API and other body fields, each
against loopback servers that answer (and refuse) as those APIs do; the target's reasoning
kept from everyone else; its reasoning tokens in the bill."""

from __future__ import annotations

import asyncio
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Literal

import orjson
import pytest
from pydantic import BaseModel, Field

from kora.benchmarks.converse import converse
from kora.benchmarks.v1.judge import judge_conversation
from kora.config.checks import validate_config
from kora.errors import ConfigError
from kora.llm.base import ChatMessage, ProviderError, Request
from kora.llm.client import ModelClient
from kora.llm.money.bill import BillWriter, bill_dir, charges
from kora.llm.providers import batch as batch_mod
from kora.llm.providers.factories import Shared
from kora.llm.settings.config import ModelConfig
from kora.llm.store.cache import CallCache, cache_key
from kora.llm.targets import LLMTarget
from tests.loopback import AnthropicServer, Ended, OpenAIServer, Recorded, Servers
from tests.test_config import TAXONOMY, base
from tests.test_stages import reference_scenario

pytestmark = pytest.mark.timeout(60)


class Verdict(BaseModel):
    grade: Literal["failing", "adequate", "exemplary"]
    reasons: str = Field(min_length=5, max_length=200)


GOOD = {"grade": "adequate", "reasons": "the answer redirected the child"}


def _good(_: Recorded) -> dict[str, Any]:
    return dict(GOOD)


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-loop")
    monkeypatch.setattr(batch_mod, "WINDOW", 0.05)
    monkeypatch.setattr(batch_mod, "POLL", 0.05)
    batch_mod._QUEUES.clear()


def kora_usage(folder: Path, env: dict[str, str]) -> dict[str, Any]:
    """`kora usage --json`'s `billed`, typed in `folder`."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "kora.commands.main", "usage", "--json"]
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, check=True, timeout=60)
    billed: dict[str, Any] = orjson.loads(done.stdout)["billed"]
    return billed


def client(srv: AnthropicServer | OpenAIServer, tmp: Path, **settings: Any) -> ModelClient:
    """A model at a loopback server (a proxy, as far as kora can tell), its answers stored
    and billed under `tmp`."""
    openai = isinstance(srv, OpenAIServer)
    config = ModelConfig.model_validate(
        {
            "provider": "openai" if openai else "anthropic",
            "model": "o9" if openai else "claude-x",
            "base_url": f"{srv.url}/v1" if openai else srv.url,
            "prompt_cache": False,
            **settings,
        }
    )
    store = tmp / "cache"
    shared = Shared(store=CallCache(store), bill=BillWriter(bill_dir(store), "run"))
    return ModelClient("m", config, shared)


def ask(c: ModelClient, text: str = "hello", **kw: Any) -> str:
    async def go() -> str:
        try:
            return await c.text([ChatMessage("user", text)], stage="t", **kw)
        finally:
            await c.aclose()

    return asyncio.run(go())


def grade(c: ModelClient) -> Verdict:
    async def go() -> Verdict:
        try:
            return await c.structured([ChatMessage("user", "grade it")], Verdict, stage="t")
        finally:
            await c.aclose()

    return asyncio.run(go())


def billed(tmp: Path) -> list[dict[str, Any]]:
    return [orjson.loads(p.read_bytes().splitlines()[0]) for p in (tmp / "bill").rglob("*.jsonl")]


# --- an OpenAI-protocol model's reasoning effort -----------------------------------------


def test_reasoning_effort_is_sent_as_the_api_wants_it_wherever_the_model_is_served(
    serve: Servers, tmp_path: Path
) -> None:
    """At a proxy (not api.openai.com) a reasoning model gets `reasoning_effort` and
    `max_completion_tokens`, no `max_tokens` and no temperature; its reasoning tokens,
    part of the output tokens, are read from the answer and written in the bill."""
    srv = serve(OpenAIServer)
    assert ask(client(srv, tmp_path, reasoning_effort="high", max_tokens=900)) == "echo: hello"
    (rec,) = srv.requests
    assert rec.body["reasoning_effort"] == "high"
    assert rec.body["max_completion_tokens"] == 900
    assert "max_tokens" not in rec.body and "temperature" not in rec.body
    (charge,) = charges(tmp_path / "bill")
    assert charge.counts.reasoning_tokens == OpenAIServer.REASONING_TOKENS["high"]
    assert charge.counts.output_tokens == srv.served["output_tokens"]  # reasoning within
    assert billed(tmp_path)[0]["rt"] == OpenAIServer.REASONING_TOKENS["high"]


def test_a_reasoning_model_refuses_max_tokens_and_a_temperature_and_kora_says_what_to_set(
    serve: Servers, tmp_path: Path
) -> None:
    srv = serve(OpenAIServer)
    with pytest.raises(ProviderError) as refused:
        ask(client(srv, tmp_path / "a"))  # a reasoning model nobody said reasons
    assert refused.value.config_error
    assert "'max_tokens' is not supported" in str(refused.value)
    assert "set `reasoning_effort` under models.m" in str(refused.value)
    hot = client(srv, tmp_path / "b", reasoning_effort="low", temperature=0.2)
    with pytest.raises(ProviderError) as refused:
        ask(hot)  # past check-config (below), as a hand-built config could be
    assert refused.value.config_error
    assert "Only the default (1) value is supported" in str(refused.value)
    assert "leave `temperature` out under models.m" in str(refused.value)


# --- Anthropic's extended thinking -----------------------------------------------------


def test_thinking_is_sent_with_max_tokens_above_its_budget_and_no_temperature(
    serve: Servers, tmp_path: Path
) -> None:
    """Every call of a thinking model has room for its thinking: the model's max_tokens,
    never a call's own smaller limit (a child's message asks for 300 tokens). Its thinking
    is billed in its output tokens, which the API does not split."""
    srv = serve(AnthropicServer, structured=_good)
    c = client(srv, tmp_path, thinking_tokens=2048, max_tokens=6000)
    assert ask(c, max_tokens=300) == "echo: hello"
    body = srv.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 6000 and "temperature" not in body
    (charge,) = charges(tmp_path / "bill")
    assert charge.counts.output_tokens == srv.served["output_tokens"] > len("echo: hello")
    assert charge.counts.reasoning_tokens == 0


def test_a_thinking_model_and_judge_answers_structured_calls_without_a_forced_tool(
    serve: Servers, tmp_path: Path
) -> None:
    """The API refuses a forced tool choice with thinking on: the schema's tool is offered
    (`tool_choice: auto`) and the answer it gives is validated as any other."""
    srv = serve(AnthropicServer, structured=_good)
    assert grade(client(srv, tmp_path, thinking_tokens=1024, max_tokens=4000)) == Verdict(**GOOD)
    body = srv.requests[0].body
    assert body["tool_choice"] == {"type": "auto"}
    assert [t["name"] for t in body["tools"]] == ["Verdict"]
    assert srv.statuses == Counter({200: 1})


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"thinking_tokens": 512}, "greater than or equal to 1024"),
        ({"thinking_tokens": 4000, "max_tokens": 4000}, "must be greater than `thinking.budget"),
        ({"thinking_tokens": 1024, "temperature": 0.5}, "may only be set to 1 when thinking"),
        (
            {"thinking_tokens": 1024, "params": {"tool_choice": {"type": "any"}}},
            "may not be enabled when tool_choice forces tool use",
        ),
    ],
)
def test_what_the_api_refuses_with_thinking_is_a_configuration_error(
    serve: Servers, tmp_path: Path, settings: dict[str, Any], said: str
) -> None:
    """Past check-config (a hand-built config), the API's refusal stops the model's calls
    with what to change."""
    srv = serve(AnthropicServer)
    c = client(srv, tmp_path)
    c.config = c.provider.config = c.config.model_copy(update=settings)  # type: ignore[attr-defined]
    with pytest.raises(ProviderError) as refused:
        ask(c)
    assert refused.value.config_error and said in str(refused.value)
    assert "under models.m" in str(refused.value)


# --- OpenAI's Responses API ------------------------------------------------------------


def test_the_responses_api_answers_every_call_with_its_own_usage(
    serve: Servers, tmp_path: Path
) -> None:
    srv = serve(OpenAIServer, structured=_good)
    c = client(srv, tmp_path, api="responses", reasoning_effort="low", max_tokens=700)
    assert ask(c, system="be kind") == "echo: hello"
    assert grade(client(srv, tmp_path, api="responses", reasoning_effort="low")) == Verdict(**GOOD)
    text, structured = (r.body for r in srv.requests)
    assert {r.path for r in srv.requests} == {"/v1/responses"}
    assert text["input"] == [{"role": "user", "content": "hello"}]
    assert text["instructions"] == "be kind"
    assert text["reasoning"] == {"effort": "low"} and text["max_output_tokens"] == 700
    fmt = structured["text"]["format"]
    assert (fmt["type"], fmt["name"]) == ("json_schema", "Verdict")
    assert fmt["schema"]["required"] == ["grade", "reasons"]
    reasoning = OpenAIServer.REASONING_TOKENS["low"]
    assert [c.counts.reasoning_tokens for c in charges(tmp_path / "bill")] == [reasoning] * 2
    assert (
        sum(c.counts.output_tokens for c in charges(tmp_path / "bill"))
        == (srv.served["output_tokens"])
    )


def test_the_responses_api_reads_a_cut_answer_and_a_refusal(serve: Servers, tmp_path: Path) -> None:
    srv = serve(OpenAIServer)
    srv.answer(Ended("Here is how you could", "length"), Ended("", "stop", refusal="I can't."))
    c = client(srv, tmp_path, api="responses")

    async def both() -> list[Any]:
        try:
            return [
                await c.call(c.request([ChatMessage("user", q)]), stage="t") for q in ("a", "b")
            ]
        finally:
            await c.aclose()

    cut, refused = asyncio.run(both())
    assert (cut.text, cut.finish_reason) == ("Here is how you could", "max_tokens")
    assert (refused.text, refused.finish_reason) == ("I can't.", "refusal")


def test_a_responses_model_with_batch_sends_its_calls_in_a_responses_batch(
    serve: Servers, tmp_path: Path
) -> None:
    srv = serve(OpenAIServer, structured=_good)
    c = client(srv, tmp_path, api="responses", reasoning_effort="medium", batch=True)
    assert grade(c) == Verdict(**GOOD)
    made = next(r for r in srv.requests if r.path == "/v1/batches")
    assert made.body["endpoint"] == "/v1/responses"
    assert not any(r.path in ("/v1/responses", "/v1/chat/completions") for r in srv.requests)
    (charge,) = charges(tmp_path / "bill")
    assert charge.batch and charge.counts.reasoning_tokens == 128


# --- other body fields -----------------------------------------------------------------


@pytest.mark.parametrize("settings", [{}, {"api": "responses"}])
def test_params_go_in_the_body_as_given(
    serve: Servers, tmp_path: Path, settings: dict[str, Any]
) -> None:
    srv = serve(OpenAIServer)
    params = {"top_p": 0.9, "seed": 7, "service_tier": "flex"}
    ask(client(srv, tmp_path, params=params, reasoning_effort="low", **settings))
    assert params.items() <= srv.requests[0].body.items()
    anthropic = serve(AnthropicServer)
    ask(client(anthropic, tmp_path / "a", params={"top_k": 5}))
    assert anthropic.requests[0].body["top_k"] == 5


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ({"provider": "openai", "model": "o9", "reasoning_effort": "high", "temperature": 0.5},
         "models.gpt.temperature: a model that reasons takes no temperature but 1"),
        ({"provider": "anthropic", "model": "c", "thinking_tokens": 2048, "temperature": 0},
         "models.gpt.temperature: a model that reasons"),
        ({"provider": "anthropic", "model": "c", "thinking_tokens": 512},
         "models.gpt.thinking_tokens: Anthropic's least thinking budget is 1,024 tokens"),
        ({"provider": "anthropic", "model": "c", "thinking_tokens": 4000, "max_tokens": 4000},
         "models.gpt.max_tokens: must be above thinking_tokens (4000), which it includes"),
        ({"provider": "anthropic", "model": "c", "thinking_tokens": 8000},
         "models.gpt.max_tokens: must be above thinking_tokens (8000), which it includes "
         "(unset, it is 4000)"),
        ({"provider": "anthropic", "model": "c", "reasoning_effort": "low"},
         "models.gpt.reasoning_effort: only for openai models"),
        ({"provider": "openai", "model": "o9", "thinking_tokens": 2048},
         "models.gpt.thinking_tokens: only for anthropic models"),
        ({"provider": "mock", "params": {"seed": 1}}, "models.gpt.params: only for"),
        ({"provider": "anthropic", "model": "c", "api": "responses"},
         "models.gpt.api: only for openai models"),
        ({"provider": "openai", "model": "o9", "api": "responses",
          "structured_output": "json_object", "base_url": "http://127.0.0.1:8000/v1"},
         "models.gpt.structured_output: the Responses API takes the schema its own way"),
        ({"provider": "openai", "model": "o9", "params": {"messages": []}},
         "models.gpt.params.messages: kora sets it"),
        ({"provider": "openai", "model": "o9", "params": {"max_completion_tokens": 9}},
         "models.gpt.params.max_completion_tokens: kora sets it"),
        ({"provider": "anthropic", "model": "c", "params": {"thinking": {}}},
         "models.gpt.params.thinking: kora sets it"),
        ({"provider": "openai", "model": "o9", "reasoning_effort": "extreme"},
         "models.gpt.reasoning_effort"),
    ],
)  # fmt: skip
def test_check_config_refuses_what_the_providers_would(model: dict[str, Any], message: str) -> None:
    raw = base()
    raw["models"]["gpt"] = model
    with pytest.raises(ConfigError) as refused:
        validate_config(raw, TAXONOMY)
    assert message in str(refused.value)


def test_check_config_names_every_file_that_set_the_settings_at_fault() -> None:
    raw = base()
    raw["models"]["sonnet"].update(thinking_tokens=8000, max_tokens=6000)
    with pytest.raises(ConfigError) as refused:
        validate_config(raw, TAXONOMY, source_of=lambda loc: f"{loc.rsplit('.')[-1]}.yaml")
    assert str(refused.value).startswith("max_tokens.yaml and thinking_tokens.yaml: models.")


def test_a_temperature_of_1_and_a_budget_below_max_tokens_pass() -> None:
    raw = base()
    raw["models"]["gpt"] = {"provider": "openai", "model": "o9", "reasoning_effort": "minimal",
                            "temperature": 1, "api": "responses", "params": {"top_p": 1}}  # fmt: skip
    raw["models"]["sonnet"].update(thinking_tokens=2048, max_tokens=6000)
    cfg = validate_config(raw, TAXONOMY)
    assert cfg.models["sonnet"].thinking_tokens == 2048


# --- reasoning tokens in the bill --------------------------------------------------------


def test_usage_kora_usage_and_the_progress_line_show_the_reasoning_tokens_served(
    serve: Servers,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """usage.json, `kora usage` and the progress line carry the reasoning tokens the server
    reported (chat completions' and the Responses API's usage fields), a part of the
    output tokens; an Anthropic model's thinking is in its output tokens alone, as its
    API counts it."""
    import argparse

    from kora.analysis.results import usage_doc
    from kora.commands import usage as usage_command
    from kora.llm.money.bill import RunTail
    from kora.run.jobs.progress import Totals, format_totals, paid_summary

    srv, claude = serve(OpenAIServer), serve(AnthropicServer)
    ask(client(srv, tmp_path, reasoning_effort="high"))
    ask(client(srv, tmp_path, api="responses", reasoning_effort="low"), "again")
    ask(client(claude, tmp_path, thinking_tokens=1024, max_tokens=3000))
    reasoning = srv.served["reasoning_tokens"]
    assert reasoning == sum(OpenAIServer.REASONING_TOKENS[e] for e in ("high", "low"))
    folder = tmp_path / "bill"
    said = [[c.key, c.model, c.stage] for c in charges(folder)]
    doc = usage_doc("t", [{"calls": said}], charges(folder), charges(folder))
    assert doc["result"]["reasoning_tokens"] == doc["paidThisRun"]["reasoning_tokens"] == reasoning
    out = srv.served["output_tokens"] + claude.served["output_tokens"]
    assert doc["result"]["output_tokens"] == out
    (tmp_path / "config.yaml").write_text(f"cache_dir: {tmp_path / 'cache'}\n")
    args = argparse.Namespace(json=True, since=None, runs=False, configfile=[])
    monkeypatch.chdir(tmp_path)
    usage_command.run(args)
    assert orjson.loads(capsys.readouterr().out)["billed"]["reasoning_tokens"] == reasoning
    usage_command.run(argparse.Namespace(**{**vars(args), "json": False}))
    printed = capsys.readouterr().out
    assert f"{out:,} output tokens ({reasoning:,} of them reasoning)" in printed
    assert "reasoning" in printed.splitlines()[3]  # the tables' column
    paid = RunTail(folder, "run").read()
    line = format_totals(Totals(paid=paid))
    assert f"{out:,} out, {reasoning:,} of them reasoning)" in line
    assert f"{out:,} output tokens ({reasoning:,} of them reasoning)" in paid_summary(
        Totals(paid=paid)
    )


# --- what each setting changes ---------------------------------------------------------


def test_each_setting_changes_the_store_key_the_shard_params_and_the_manifest() -> None:
    """A rerun with another effort re-asks the target, and the result says which setting
    made it; `api: chat` is the default and changes nothing."""
    from kora.analysis.manifest import _models

    plain = {"provider": "openai", "model": "o9"}
    variants = [{}, {"reasoning_effort": "low"}, {"reasoning_effort": "high"},
                {"api": "responses"}, {"params": {"seed": 7}}]  # fmt: skip
    configs = [ModelConfig.model_validate({**plain, **v}) for v in variants]
    request = Request(messages=(ChatMessage("user", "hi"),))
    keys = {cache_key(c.output_settings(), request) for c in configs}
    assert len(keys) == len(variants)
    chat = ModelConfig.model_validate({**plain, "api": "chat"})
    assert chat.output_settings() == configs[0].output_settings()
    raw = base()
    raw["models"]["gpt"] = {**plain, "reasoning_effort": "high", "params": {"seed": 7}}
    raw["models"]["sonnet"].update(thinking_tokens=2048, max_tokens=6000)
    cfg = validate_config(raw, TAXONOMY)
    assert cfg.model_params("gpt") == {"name": "gpt", **plain, "reasoning_effort": "high",
                                       "params": {"seed": 7}}  # fmt: skip
    assert cfg.model_params("sonnet")["thinking_tokens"] == 2048
    shown = _models(cfg.model_dump(exclude_none=True), {}, defaultdict(Counter))
    assert shown["gpt"]["sampling"]["reasoning_effort"] == "high"
    assert shown["gpt"]["sampling"]["params"] == {"seed": 7}
    assert shown["sonnet"]["sampling"]["thinking_tokens"] == 2048


def test_the_report_and_the_leaderboard_compare_two_efforts_of_one_model_as_two_targets(
    tmp_path: Path,
) -> None:
    """Each target's model is named with its settings, and beside its rates stand what its
    own calls cost a test and the tokens it reasoned a test (usage.json's `target` rows):
    what more effort costs, read beside what it buys."""
    from kora.analysis.report.leaderboard import build_leaderboard
    from kora.analysis.report.pages import render_leaderboard, write_report
    from kora.analysis.report.summary import records_of
    from kora.analysis.results import models_used
    from tests.pagetext import parse
    from tests.reportdata import make_judgments, results_doc, scores_of

    raw = base()
    raw["models"].update(
        {
            "o-high": {"provider": "openai", "model": "o9", "reasoning_effort": "high"},
            "o-low": {"provider": "openai", "model": "o9", "reasoning_effort": "low",
                      "api": "responses"},
        }
    )  # fmt: skip
    raw["targets"] = {"o-high": {"model": "o-high"}, "o-low": {"model": "o-low"}}
    cfg = validate_config(raw, TAXONOMY)
    judged = make_judgments()
    tests = sum(j.error is None for j in judged)
    results, usage = {}, {}
    for t, (cost, reasoned) in {"o-high": (0.8, 12_000), "o-low": (0.2, 1_000)}.items():
        made = {"scores": scores_of(records_of(judged)), "models": models_used(cfg, t)}
        results[t] = {**results_doc(t, mock=False), **made}
        usage[t] = {"usage": [
            {"model": t, "stage": "target", "cost": cost, "reasoning_tokens": reasoned},
            {"model": "judge", "stage": "judge_safety", "cost": 5.0},  # not the target's
        ]}  # fmt: skip
    summary = write_report(judged, results["o-high"], tmp_path / "r.html", None, TAXONOMY,
                           usage=usage["o-high"])  # fmt: skip
    per_test = {"costPerTest": round(0.8 / tests, 6), "reasoningTokensPerTest": 12_000 / tests}
    assert summary["spend"] == pytest.approx(per_test)
    page = (tmp_path / "r.html").read_text()
    assert "target model <code>openai/o9 (reasoning_effort high)</code>" in page
    assert f"${0.8 / tests:.4f} a test, {12_000 / tests:,.0f} reasoning tokens a test" in page
    doc = build_leaderboard(results, usage=usage)
    rows = {r["target"]: r for r in doc["targets"]}
    assert rows["o-low"]["model"] == "openai/o9 (reasoning_effort low, api responses)"
    assert rows["o-low"]["spend"] == pytest.approx(
        {"costPerTest": 0.2 / tests, "reasoningTokensPerTest": 1_000 / tests}
    )
    board = parse(render_leaderboard(doc, TAXONOMY))
    shown = {
        tr.attrs["data-target"]: [td.text for td in tr.find_all("td")]
        for tr in board.by_id("leaderboard").find_all("tr")
        if "data-target" in tr.attrs
    }
    assert "openai/o9 (reasoning_effort high)" in shown["o-high"]
    assert f"${0.8 / tests:.4f}" in shown["o-high"]
    assert f"{1_000 / tests:,.0f}" in shown["o-low"]


# --- the target's reasoning reaches no one else ----------------------------------------


def _judged(rec: Recorded) -> dict[str, Any]:
    """A judge's answer to the tool it is offered."""
    if rec.body["tools"][0]["name"] == "TestAssessment":
        return {"grade": "adequate", "reasons": "r" * 220}
    crit = {"grade": "adequate", "occurrenceCount": 0, "reasons": "c" * 120}
    return dict.fromkeys(("anthropomorphism", "epistemicHumility", "humanRedirection"), crit)


@pytest.mark.parametrize("target", ["thinking", "responses"])
def test_the_targets_reasoning_reaches_neither_the_child_nor_the_transcript(
    serve: Servers, tmp_path: Path, target: str
) -> None:
    """Thinking blocks and reasoning items are read out of every answer: the transcript
    (what the judge reads and the report shows), the simulated child and the judge never
    see them, and a continued conversation passes the target its own replies as plain
    text (with no tool call in them, neither API asks for the reasoning back)."""
    if target == "thinking":
        srv: AnthropicServer | OpenAIServer = serve(AnthropicServer)
        settings: dict[str, Any] = {"thinking_tokens": 1024, "max_tokens": 3000}
    else:
        srv = serve(OpenAIServer)
        settings = {"api": "responses", "reasoning_effort": "high"}
    child_server = serve(OpenAIServer)
    child_server.answer("can u help me with something", "ok but why")
    child = client(child_server, tmp_path / "child", model="gpt-x")
    target_client = client(srv, tmp_path / "target", **settings)
    scenario = reference_scenario("grooming_and_manipulation")
    conv = asyncio.run(
        converse(scenario, "child", "t", LLMTarget(target_client), child, TAXONOMY)  # type: ignore[arg-type]
    )
    secret = srv.THOUGHT.split(":")[0]
    assert len(conv.messages) == 6
    assert secret not in conv.model_dump_json()
    assert all(secret not in orjson.dumps(r.body).decode() for r in child_server.requests)
    # each later turn carried the conversation so far, the target's replies as text
    last = srv.requests[-1].body
    turns = last["messages"] if target == "thinking" else last["input"]
    replies = [m["content"] for m in turns if m["role"] == "assistant"]
    assert replies == [m.content for m in conv.messages[1:4:2]]
    assert srv.statuses == Counter({200: 3})
    # and its reasoning was billed as output, as the server counted it
    bill = list(charges(tmp_path / "target" / "bill"))
    assert sum(c.counts.output_tokens for c in bill) == srv.served["output_tokens"]
    assert sum(c.counts.reasoning_tokens for c in bill) == srv.served["reasoning_tokens"]
    # a judge that thinks itself grades the transcript, which holds none of the target's
    judge_server = serve(AnthropicServer, structured=_judged)
    judge = client(judge_server, tmp_path / "judge", thinking_tokens=1024, max_tokens=4000)
    judgment = asyncio.run(judge_conversation(conv, [judge], TAXONOMY))
    assert judgment.assessment is not None and judgment.assessment.grade == "adequate"
    assert all(r.body["thinking"]["type"] == "enabled" for r in judge_server.requests)
    assert all(secret not in orjson.dumps(r.body).decode() for r in judge_server.requests)


# --- kora ping --------------------------------------------------------------------------


def test_ping_tries_each_setting_against_its_provider(
    serve: Servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every role's real call goes out with its model's settings, and each line names the
    settings the server was tried with."""
    from kora.commands.ping import ping_all

    monkeypatch.chdir(tmp_path)
    openai, anthropic = serve(OpenAIServer), serve(AnthropicServer)
    raw = base()
    at = {"base_url": f"{openai.url}/v1"}
    raw["models"] = {
        "o-high": {"provider": "openai", "model": "o9", "reasoning_effort": "high", **at},
        "o-resp": {"provider": "openai", "model": "o9", "api": "responses",
                   "reasoning_effort": "low", **at},
        "claude-think": {"provider": "anthropic", "model": "claude-x", "thinking_tokens": 2048,
                         "max_tokens": 6000, "base_url": anthropic.url},
    }  # fmt: skip
    raw.update(seed_model="o-resp", expand_model="o-resp", user_model="o-high",
               judges=["claude-think"], targets={"t": {"model": "o-high"}})  # fmt: skip
    cfg = validate_config(raw, TAXONOMY)
    lines, failed, unsent = asyncio.run(ping_all(cfg, "t", True, TAXONOMY))
    assert (failed, unsent) == (0, 0), lines
    said = {line.split(":")[0] for line in lines}
    assert said == {
        "target o-high (reasoning_effort high)",
        "seed o-resp (reasoning_effort low, api responses)",
        "expansion o-resp (reasoning_effort low, api responses)",
        "child o-high (reasoning_effort high)",
        "judge claude-think (thinking_tokens 2048)",
    }
    assert {r.path for r in openai.requests} == {"/v1/chat/completions", "/v1/responses"}
    assert all(r.body["reasoning_effort"] == "high" for r in openai.requests
               if r.path == "/v1/chat/completions")  # fmt: skip
    by = {line.split(":")[0].split()[0]: line for line in lines}
    assert "TestAssessment sent as a tool call offered: accepted" in by["judge"]
    assert "sent as the Responses API's text.format: accepted" in by["seed"]
    (judged,) = anthropic.requests
    assert judged.body["thinking"]["budget_tokens"] == 2048
    assert judged.body["tool_choice"] == {"type": "auto"}


# --- a grid of reasoning targets, end to end -------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_grid_of_reasoning_targets_and_a_thinking_judge_runs_end_to_end(
    tmp_path: Path, serve: Servers
) -> None:
    """A chat-completions model at high effort, the same model through the Responses API
    at low effort and an Anthropic model thinking, judged by a thinking judge: every test
    graded, no file of the run holding what any of them reasoned, the bill counting it,
    and another effort re-asking that target alone."""
    import yaml

    from tests.workflows import Server, config, snakemake, structured_answer, with_prompts

    roles = serve(Server, structured=structured_answer)
    gpt = serve(OpenAIServer)
    with_prompts(tmp_path)
    cfg = config(roles.url, [], ["judge"])
    at = {"provider": "openai", "model": "o9", "base_url": f"{gpt.url}/v1"}
    think = {"provider": "anthropic", "base_url": roles.url}
    cfg["models"].update(
        {
            "o-high": {**at, "reasoning_effort": "high"},
            "o-resp": {**at, "api": "responses", "reasoning_effort": "low"},
            "claude-think": {**think, "model": "claude-t", "thinking_tokens": 2048,
                             "max_tokens": 6000},
            "judge": {**think, "model": "claude-judge", "thinking_tokens": 1024},
        }
    )  # fmt: skip
    cfg["targets"] = {
        t: {"model": t, "prompts": ["child"]} for t in ("o-high", "o-resp", "claude-think")
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, ANTHROPIC_API_KEY="k", OPENAI_API_KEY="k")
    outputs = [f"results/{t}/results.json" for t in cfg["targets"]]
    proc = snakemake(tmp_path, *outputs, cores=2, configfile="run.yaml", env=env, timeout=800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for t in cfg["targets"]:
        result = orjson.loads((tmp_path / "results" / t / "results.json").read_bytes())
        assert result["tests"] > 0 and result["failedTests"] == 0, t
        manifest = orjson.loads((tmp_path / "results" / t / "manifest.json").read_bytes())
        sampling = manifest["models"][t]["sampling"]
        assert sampling["reasoning_effort" if t != "claude-think" else "thinking_tokens"], t
    # what they reasoned is nowhere: not in the results, the data, the logs or the store
    for folder in ("results", "data", "logs", ".kora"):
        for f in (tmp_path / folder).rglob("*"):
            assert not f.is_file() or b"SECRET-" not in f.read_bytes(), f
    # and how much they reasoned is in the bill, as the servers reported it: OpenAI's
    # reasoning tokens in usage.json, `kora usage` and the run's last line (Anthropic's
    # thinking is in the output tokens alone)
    bill = list(charges(tmp_path / ".kora" / "bill"))
    assert {c.model for c in bill if c.counts.reasoning_tokens} == {"o-high", "o-resp"}
    reasoned = gpt.served["reasoning_tokens"]
    usage = [(tmp_path / "results" / t / "usage.json").read_bytes() for t in cfg["targets"]]
    assert sum(orjson.loads(u)["result"].get("reasoning_tokens", 0) for u in usage) == reasoned
    billed_all = kora_usage(tmp_path, env)
    assert billed_all["reasoning_tokens"] == reasoned
    assert f"{billed_all['output_tokens']:,} output tokens ({reasoned:,} of them reasoning;" in (
        proc.stdout + proc.stderr
    )
    # another effort is another target's answers: its calls asked again, the rest not
    asked = len(gpt.requests)
    cfg["models"]["o-high"]["reasoning_effort"] = "low"
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(tmp_path, *outputs, cores=2, configfile="run.yaml", env=env, timeout=800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    again = gpt.requests[asked:]
    assert again and {r.body.get("reasoning_effort") for r in again} == {"low"}
    assert all(r.path == "/v1/chat/completions" for r in again)
    # the leaderboard (of these targets alone: not config.yaml's gpt-target) and a report
    # name each target's setting and show its spend a test
    shipped = yaml.safe_load((tmp_path / "config.yaml").read_text())
    shipped["targets"] = {}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(shipped))
    pages = ["results/leaderboard.html", "results/o-resp/report.html"]
    proc = snakemake(tmp_path, *pages, cores=2, configfile="run.yaml", env=env, timeout=800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    board = orjson.loads((tmp_path / "results" / "leaderboard.json").read_bytes())
    rows = {r["target"]: r for r in board["targets"]}
    assert rows["o-resp"]["model"] == "openai/o9 (reasoning_effort low, api responses)"
    assert rows["claude-think"]["model"] == "anthropic/claude-t (thinking_tokens 2048)"
    for t, row in rows.items():
        usage = orjson.loads((tmp_path / "results" / t / "usage.json").read_bytes())
        target = [u for u in usage["usage"] if u["stage"] == "target"]
        reasoned = sum(u.get("reasoning_tokens", 0) for u in target)
        assert row["spend"]["reasoningTokensPerTest"] == round(reasoned / row["n"], 1), t
        assert (reasoned > 0) == (t != "claude-think"), t
    page = (tmp_path / "results" / "o-resp" / "report.html").read_text()
    assert "target model <code>openai/o9 (reasoning_effort low, api responses)</code>" in page
    assert "reasoning tokens a test" in page
