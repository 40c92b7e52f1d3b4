"""Issue 25, item 2: a huge reply is a failed call, not a crash of the results.

An answer above the model's `max_reply_bytes` fails the attempt while it is being read
(never read whole), with its size and the limit in the message, on every path (the
Anthropic SDK, the OpenAI-compatible client, a chat service); and the aggregation reads
a record of any size (DuckDB's 16 MB `maximum_object_size` is raised to the file's)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from kora.analysis.aggregate import aggregate_path
from kora.benchmarks.taxonomy import load_taxonomy
from kora.llm.base import ChatMessage, ProviderError
from kora.llm.client import ModelClient
from kora.llm.providers.service import ServiceTarget
from kora.llm.retry import RetryPolicy
from kora.llm.settings.bounds import DEFAULT_MAX_REPLY_BYTES
from kora.llm.settings.config import ModelConfig
from tests.helpers import REPO
from tests.loopback import OpenAIServer
from tests.misbehaving import Misbehaving, huge

LIMIT = 10_000
REPLY = 100 * 1024 * 1024  # what the server would send: 100 MB
TWO_TRIES = RetryPolicy(attempts=2)


def _llm(provider: str, url: str, **cfg: object) -> ModelClient:
    base = url if provider == "anthropic" else f"{url}/v1"
    config = ModelConfig.model_validate(
        {"provider": provider, "model": "m", "base_url": base, "timeout": 30, **cfg}
    )
    return ModelClient("big", config, retry_policy=TWO_TRIES)


async def _ask(client: ModelClient) -> str:
    try:
        return await client.text([ChatMessage("user", "hi")], stage="test")
    finally:
        await client.aclose()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_reply_over_the_limit_fails_while_it_is_read(
    provider: str, declared: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    with Misbehaving() as srv:
        srv.every(huge(REPLY, declared=declared))
        client = _llm(provider, srv.url, max_reply_bytes=LIMIT)
        with pytest.raises(ProviderError) as info:
            asyncio.run(_ask(client))
        assert srv.count == 2  # a failed attempt, retried
        assert srv.sent_bytes < REPLY // 10  # given up early, not read whole
    msg = str(info.value)
    size = f"{REPLY:,} bytes" if declared else f"more than {LIMIT:,} bytes"
    assert size in msg and f"limit of {LIMIT:,} bytes (max_reply_bytes)" in msg, msg
    assert client.usage.totals()["failures"] == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_chat_service_reply_over_the_limit_fails(declared: bool) -> None:
    config = ModelConfig.model_validate(
        {"provider": "http", "base_url": "http://x", "max_reply_bytes": LIMIT,
         "http": {"turn": {"url": "/chat", "body": {"q": "{{ message }}"}}}}
    )  # fmt: skip
    with Misbehaving() as srv:
        srv.every(huge(REPLY, declared=declared))
        target = ServiceTarget("svc", config.model_copy(update={"base_url": srv.url}),
                               retry_policy=TWO_TRIES)  # fmt: skip

        async def turn() -> None:
            try:
                session = await target.open_session("7to9")
                await session.reply([ChatMessage("user", "hi")])
            finally:
                await target.aclose()

        with pytest.raises(ProviderError, match=r"over the limit of 10,000 bytes"):
            asyncio.run(turn())
        assert srv.sent_bytes < REPLY // 10


@pytest.mark.timeout(30)
def test_a_reply_within_the_limit_passes_and_the_default_is_generous(
    openai_server: OpenAIServer,
) -> None:
    assert ModelConfig(provider="openai", model="m").max_reply_bytes == DEFAULT_MAX_REPLY_BYTES
    assert DEFAULT_MAX_REPLY_BYTES >= 1_000_000
    text = "x" * 5_000
    openai_server.answer(text)
    # the body (JSON around the text) is over 5,000 bytes: the limit is on the body
    assert asyncio.run(_ask(_llm("openai", openai_server.url, max_reply_bytes=6_000))) == text


def _judged(risk: dict[str, str], content: str) -> dict[str, object]:
    crit = {"grade": "adequate", "occurrenceCount": 1, "reasons": "r" * 120}
    seed = {"riskCategoryId": risk["category"], "riskId": risk["id"], "ageRange": "7to9",
            "id": "s1"}  # fmt: skip
    return {
        "scenario": {**seed, "seed": seed},
        "prompt": "default",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": content}],
        "assessment": {"grade": "adequate", "reasons": "x" * 250},
        "behaviorAssessment": {k: crit for k in
                               ("anthropomorphism", "epistemicHumility", "humanRedirection")},
    }  # fmt: skip


@pytest.mark.timeout(120)
@pytest.mark.parametrize("layout", ["json", "jsonl"])
def test_the_aggregation_reads_a_record_of_any_size(tmp_path: Path, layout: str) -> None:
    taxonomy = load_taxonomy(REPO / "data" / "taxonomy")
    category, risk = next(iter(taxonomy.risks.values()))
    ids = {"category": category.id, "id": risk.id}
    small, big = _judged(ids, "fine"), _judged(ids, "a" * (20 * 1024 * 1024))
    folder = tmp_path / "tests"
    folder.mkdir()
    if layout == "json":  # the reference's per-test files, one object each
        (folder / "a.json").write_bytes(orjson.dumps(big, option=orjson.OPT_INDENT_2))
        (folder / "b.json").write_bytes(orjson.dumps(small))
    else:  # this project's shards, one record a line, the big one first
        (folder / "a.jsonl").write_bytes(orjson.dumps(big) + b"\n" + orjson.dumps(small) + b"\n")
    scores, failed = aggregate_path(folder, taxonomy)
    assert not failed
    assert sum(s["sums"]["al"] for s in scores) == 2
