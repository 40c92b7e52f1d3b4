"""Against a real server implementation, not the project's loopback fakes: llama-cpp-python's
OpenAI-compatible server (built by .ci/llamacpp-setup.sh) with SmolLM2-135M-Instruct, on a
free loopback port (tests/llamacpp.py).

- the target role through it end to end on a one-cell grid (results.json, the report), the
  other roles on the offline mock; a judge misconfigured in the same run stops it at once
  with the server's reason and what to change;
- a judge's structured call in the llama.cpp mode without the schema's bounds: a valid
  answer, or a clear failure, and the server still up;
- the OpenAI form refused: a configuration error on the first attempt, never retried;
- `kora ping` saying, per role and model, what the server accepted.

Without the server these tests skip; with KORA_REQUIRE_LLAMACPP=1 (CI, after a successful
set-up) they fail instead. A tiny model writes unpredictable text: nothing here depends on
what it says, only on its shape.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kora import benchmarks
from kora.benchmarks.outcomes import TestAssessment
from kora.benchmarks.schemas import Scenario
from kora.benchmarks.showcase import rendered_prompts
from kora.commands.main import main as kora_main
from kora.llm.answers import StructuredOutputError
from kora.llm.base import ChatMessage, ProviderError
from kora.llm.client import ModelClient
from kora.llm.settings.config import ModelConfig
from tests.helpers import REPO, copy_workflow
from tests.llamacpp import ALIAS, LlamaServer, llama_server, require
from tests.pagetext import texts
from tests.workflows import job_stats, snakemake

# the judge's prompt is ~1,700 tokens and its behaviour prompt ~3,000: more than the
# server's default context of 2,048
N_CTX = 8192


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    require()
    with llama_server(tmp_path_factory.mktemp("llama") / "server.log", n_ctx=N_CTX) as srv:
        yield srv


def smol(url: str, **extra: Any) -> dict[str, Any]:
    # one request at a time: this server has no parallel slots and queues the rest
    return {"provider": "openai", "model": ALIAS, "base_url": url, "max_tokens": 120,
            # generous: other tests share the 2 cores, and a request queues behind others
            "temperature": 0.0, "timeout": 600.0, "max_concurrency": 1, **extra}  # fmt: skip


def judge_call() -> tuple[list[ChatMessage], str | None]:
    """The safety judge's real prompt for the example scenario."""
    scenario = Scenario.model_validate(
        orjson.loads((REPO / "docs" / "example-scenario.json").read_bytes())
    )
    bm = benchmarks.get("v1")
    (call,) = [r for r in rendered_prompts(bm, scenario, bm.taxonomy) if r.name == "judge_safety"]
    return [ChatMessage("user", call.prompt.user or "")], call.prompt.system


def structured(config: ModelConfig) -> tuple[ModelClient, TestAssessment | BaseException]:
    client = ModelClient("smol-judge", config)
    messages, system = judge_call()

    async def go() -> TestAssessment:
        try:
            return await client.structured(
                messages, TestAssessment, stage="judge_safety", system=system
            )
        finally:
            await client.aclose()

    try:
        return client, asyncio.run(go())
    except (ProviderError, StructuredOutputError) as exc:
        return client, exc


def recipe(url: str) -> dict[str, Any]:
    """config/examples/llamacpp.yaml (docs/local-servers.md) at this server, its replies
    kept short."""
    cfg: dict[str, Any] = yaml.safe_load((REPO / "config/examples/llamacpp.yaml").read_text())
    cfg["models"]["smol"].update(base_url=url, max_tokens=120)
    return cfg


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_target_through_llamacpp_end_to_end(server: LlamaServer, tmp_path: Path) -> None:
    """The recipe's run, first with a judge left in OpenAI's form on the same server."""
    copy_workflow(tmp_path)
    overlay = recipe(server.url)
    smol_cfg = overlay["models"]["smol"]
    # misconfigured: the judge's structured calls go in OpenAI's form, which this server
    # refuses
    overlay["models"]["judge"] = {
        k: v for k, v in smol_cfg.items() if k not in ("structured_output", "schema_bounds")
    }
    overlay["judges"] = ["judge"]
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(overlay))
    wanted = ("results/smol/results.json", "results/smol/report.html")

    started = time.monotonic()
    bad = snakemake(tmp_path, *wanted)
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0, out[-3000:]
    assert "model 'judge' (smollm2): HTTP 500" in out, out[-3000:]
    assert "body.response_format.type: Input should be 'text' or 'json_object'" in out
    assert "structured_output: json_object" in out and "models.judge" in out
    assert "Fix the config first" in out and "\\u000a" not in out
    assert "waiting to retry" not in out  # refused once, never retried
    assert not (tmp_path / wanted[0]).exists()
    print(f"misconfigured run: {time.monotonic() - started:.1f} s")

    # the conversations are the server's: every target turn has text
    shards = list((tmp_path / "results/smol/conversations").rglob("*.jsonl"))
    records = [orjson.loads(line) for f in shards for line in f.read_bytes().splitlines()]
    assert len(records) == 2 and all(r.get("error") is None for r in records), records
    for r in records:
        replies = [m["content"] for m in r["messages"] if m["role"] == "assistant"]
        assert len(replies) == 3 and all(isinstance(t, str) for t in replies)
        assert any(t.strip() for t in replies)

    # the recipe as it is (its judge the offline mock): the conversations are not made again
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(recipe(server.url)))
    started = time.monotonic()
    good = snakemake(tmp_path, *wanted)
    assert good.returncode == 0, (good.stdout + good.stderr)[-3000:]
    print(f"fixed run: {time.monotonic() - started:.1f} s")
    assert "conversations" not in job_stats(good.stdout + good.stderr)
    results = orjson.loads((tmp_path / wanted[0]).read_bytes())
    assert results["target"] == "smol" and results["models"]["smol"]["model"] == ALIAS
    assert results["tests"] == 2 and results["failedTests"] == 0 and results["complete"]
    report = (tmp_path / wanted[1]).read_text()
    said = records[0]["messages"][1]["content"][:40]
    # the page packs the conversations' texts (kora.analysis.pagekit): read them as it does
    assert "Incomplete run" not in report
    assert any(said in str(m) for m in texts(report)["m"]), said

    again = snakemake(tmp_path, *wanted)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    assert server.alive()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_structured_call_in_the_llamacpp_mode(server: LlamaServer) -> None:
    """json_object with the schema, without its upper length and count bounds: the
    server's grammar takes it; the answer is checked against the full schema here. The
    tiny model's content may not pass: then the item fails with a clear error, and the
    server is still up."""
    config = ModelConfig.model_validate(
        smol(server.url, structured_output="json_object", schema_bounds="minimums", max_tokens=400)
    )
    started = time.monotonic()
    client, answer = structured(config)
    took = time.monotonic() - started
    print(f"structured call: {took:.1f} s, {type(answer).__name__}: {str(answer)[:300]}")
    if isinstance(answer, BaseException):
        assert isinstance(answer, StructuredOutputError), answer
        assert "gave an invalid TestAssessment twice" in str(answer)
    else:
        assert answer.grade in ("failing", "adequate", "exemplary")
    assert client.usage.last_retry == ""  # nothing retried: every answer was a 200
    assert server.alive()


@pytest.mark.timeout(300)
def test_the_openai_form_is_refused_once_saying_what_to_change(server: LlamaServer) -> None:
    config = ModelConfig.model_validate(smol(server.url))  # structured_output: json_schema
    client, answer = structured(config)
    assert isinstance(answer, ProviderError) and answer.config_error, answer
    msg = str(answer)
    assert answer.status == 500 and "Input should be 'text' or 'json_object'" in msg
    assert "To fix:" in msg and "structured_output: json_object" in msg
    assert "\\u000a" not in msg and "app.py" not in msg
    assert client.usage.last_retry == "" and client.usage.totals()["failures"] == 1
    assert server.alive()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_ping_says_what_the_server_accepts_per_role(
    server: LlamaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(REPO)
    overlay = {
        "cache_dir": str(tmp_path / "cache"),  # the checkout's config, the test's own bill
        "models": {
            "mock": {"provider": "mock"},
            "smol": smol(server.url),
            "smol-judge": smol(
                server.url, structured_output="json_object", schema_bounds="minimums"
            ),
        },
        "seed_model": "mock",
        "expand_model": "mock",
        "user_model": "mock",
        "judges": ["smol", "smol-judge", "mock"],
        "targets": {"smol": {"model": "smol"}},
    }
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(overlay))
    rc = kora_main(["ping", "smol", "--configfile", str(path)])
    out = capsys.readouterr()
    text = out.out + out.err
    print(text)
    assert rc == 1, text
    lines = {line.split(":", 1)[0]: line for line in text.splitlines() if ":" in line}
    assert ": ok in" in lines["target smol"]
    assert "FAILED" in lines["judge smol"] and "HTTP 500" in lines["judge smol"]
    assert "structured_output: json_object" in text
    assert ": ok in" in lines["judge smol-judge"]
    sent = "json_object with the schema in its `schema` field, without the schema's upper"
    assert sent in lines["judge smol-judge"] and "accepted" in lines["judge smol-judge"]
    assert ": ok in" in lines["judge mock"] and ": ok in" in lines["seed mock"]
    assert server.alive()
