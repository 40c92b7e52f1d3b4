"""Prompt caching: where requests are marked, what the provider reports, what it costs,
through the real `anthropic` SDK and the OpenAI client against loopback servers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kora.llm.base import ChatMessage, Response
from kora.llm.client import ModelClient
from kora.llm.money.bill import BillWriter, total
from kora.llm.money.usage import Counts, Usage
from kora.llm.providers.factories import Shared
from kora.llm.providers.prompt_cache import mark
from kora.llm.registry import KINDS
from kora.llm.settings.config import ModelConfig, Price
from kora.llm.store.cache import CallCache
from tests.loopback import AnthropicServer, OpenAIServer

LONG = "The rules of this conversation, at length. " * 200  # about 2,200 tokens
SHORT = "Be brief."


def _params(system: str, n_messages: int, tools: Any = None) -> dict[str, Any]:
    msgs = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(n_messages)
    ]
    out: dict[str, Any] = {"model": "claude-sonnet-5-5", "max_tokens": 100, "messages": msgs}
    if system:
        out["system"] = system
    if tools:
        out["tools"] = tools
    return out


# the shortest prompts the provider's cache keeps (kora.llm.registry)
SONNET = KINDS["anthropic"].cache_minimum("claude-sonnet-5-5")
HAIKU = KINDS["anthropic"].cache_minimum("claude-haiku-4-5")


def test_a_long_system_prompt_is_marked_and_a_short_one_is_not() -> None:
    marked = mark(_params(LONG, 1), ttl="5m", minimum=SONNET)
    assert marked["system"] == [
        {"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}
    ]
    assert marked["messages"] == _params(LONG, 1)["messages"]  # one message: unique, unmarked
    assert mark(_params(SHORT, 1), ttl="5m", minimum=SONNET) == _params(SHORT, 1)


def test_a_conversation_marks_its_last_message_and_the_ttl_is_passed() -> None:
    marked = mark(_params(LONG, 3), ttl="1h", minimum=SONNET)
    control = {"type": "ephemeral", "ttl": "1h"}
    assert marked["system"][0]["cache_control"] == control
    assert marked["messages"][:2] == _params(LONG, 3)["messages"][:2]
    assert marked["messages"][2] == {
        "role": "user",
        "content": [{"type": "text", "text": "message 2", "cache_control": control}],
    }


def test_haiku_needs_a_longer_prefix() -> None:
    medium = "x" * 6000  # about 1,500 tokens: enough for Sonnet, not for Haiku
    assert "cache_control" in str(mark(_params(medium, 1), ttl="5m", minimum=SONNET))
    assert mark(_params(medium, 1), ttl="5m", minimum=HAIKU) == _params(medium, 1)


PRICE = Price(input=3.0, output=15.0)


def _conversation(
    cfg: ModelConfig, turns: int, bill: Path, cache: CallCache | None = None
) -> tuple[Usage, Counts]:
    """The calls the conversation asked for, and what its bill (in `bill`) says it cost."""

    async def go() -> Usage:
        usage = Usage()
        client = ModelClient(
            "t", cfg, Shared(store=cache, usage=usage, bill=BillWriter(bill, "run"))
        )
        try:
            messages: list[ChatMessage] = []
            for k in range(turns):
                messages.append(ChatMessage("user", f"child says {k}"))
                resp = await client.call(client.request(messages, system=LONG), stage="target")
                messages.append(ChatMessage("assistant", resp.text))
        finally:
            await client.aclose()
        return usage

    return asyncio.run(go()), total(bill)


@pytest.fixture
def anthropic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-loop")


def test_a_conversation_reads_its_prefix_back_and_costs_less(
    anthropic_env: None, tmp_path: Path, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.answer(*[f"reply {k}" for k in range(6)])
    base = {"provider": "anthropic", "model": "claude-sonnet-5-5", "base_url": anthropic_server.url}
    _, cached = _conversation(ModelConfig(**base, price=PRICE), 3, tmp_path / "a")
    writes, reads = anthropic_server.cache_writes, anthropic_server.cache_reads
    _, plain = _conversation(
        ModelConfig(**base, price=PRICE, prompt_cache=False), 3, tmp_path / "b"
    )
    # the SDK carried the markers and the usage fields back
    assert writes > 0 and reads > 0
    assert (cached.cache_write_tokens, cached.cache_read_tokens) == (writes, reads)
    assert plain.cache_write_tokens == plain.cache_read_tokens == 0
    # the same tokens in all, priced at 1.25x written and 0.1x read
    tokens = lambda c: c.input_tokens + c.cache_write_tokens + c.cache_read_tokens  # noqa: E731
    assert tokens(cached) == tokens(plain)
    expected = (
        cached.input_tokens * 3.0
        + cached.cache_write_tokens * 3.75
        + cached.cache_read_tokens * 0.3
        + cached.output_tokens * 15.0
    ) / 1e6
    assert cached.cost == pytest.approx(expected)
    assert cached.cost < plain.cost
    assert cached.cache_saved == pytest.approx(plain.cost - cached.cost)


def test_the_call_store_does_not_care_whether_caching_was_on(
    anthropic_env: None, tmp_path: Path, anthropic_server: AnthropicServer
) -> None:
    """Markers are a transport detail: calls stored with caching on are reused with it off."""
    anthropic_server.answer(*[f"reply {k}" for k in range(3)])
    base = {"provider": "anthropic", "model": "claude-sonnet-5-5", "base_url": anthropic_server.url}
    _conversation(ModelConfig(**base), 3, tmp_path / "bill", CallCache(tmp_path))
    again, _ = _conversation(
        ModelConfig(**base, prompt_cache=False), 3, tmp_path / "bill", CallCache(tmp_path)
    )
    assert anthropic_server.count == 3
    assert again.totals()["cached"] == 3


def test_openai_cached_tokens_are_counted_apart_and_priced_at_half(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.cached_share = 0.5
    openai_server.answer("hello")
    cfg = ModelConfig(provider="openai", model="m", base_url=f"{openai_server.url}/v1", price=PRICE)

    async def go() -> Response:
        client = ModelClient("m", cfg, Shared(bill=BillWriter(tmp_path, "run")))
        try:
            r = await client.call(client.request([ChatMessage("user", LONG)]), stage="judge_safety")
        finally:
            await client.aclose()
        return r

    resp = asyncio.run(go())
    assert resp.cache_read_tokens > 0 and resp.cache_read_tokens % 128 == 0
    t = total(tmp_path)
    assert t.cost == pytest.approx(
        (t.input_tokens * 3.0 + t.cache_read_tokens * 1.5 + t.output_tokens * 15.0) / 1e6
    )


def test_usage_rows_show_caching_only_where_it_happened() -> None:
    assert "cache_read_tokens" not in Counts(calls=1).as_dict()
    row = Counts(calls=1, cache_write_tokens=10, cache_read_tokens=90, cache_saved=0.5).as_dict()
    assert row["cache_read_tokens"] == 90 and row["cache_saved"] == 0.5
