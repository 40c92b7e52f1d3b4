"""The model id a provider says answered (a dated snapshot behind a configured alias) is
kept with each answer: in the bill line written as it arrives and in the call store, so
a result's manifest can count its answers by the snapshot that gave them, including
those a later run takes from the store. Older bill lines and store entries, written
before the id was kept, still read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from kora.llm.base import ChatMessage, Response
from kora.llm.client import ModelClient
from kora.llm.money.bill import BillWriter, Charge, bill_dir, charges
from kora.llm.providers.factories import Shared
from kora.llm.settings.config import ModelConfig
from kora.llm.shared_calls import SharedCalls
from kora.llm.store.cache import CallCache
from tests.loopback import AnthropicServer, OpenAIServer, Recorded, Reply

DATED = {"claude-x": "claude-x-20250929", "gpt-x": "gpt-x-2025-08-07"}


class Dated:
    """A loopback server that answers as the provider's dated snapshot of the alias asked."""

    def handle(self, rec: Recorded, *, invalid: bool) -> Reply:
        reply: Reply = super().handle(rec, invalid=invalid)  # type: ignore[misc]
        doc = json.loads(reply.body)
        if isinstance(doc, dict) and doc.get("model") in DATED:
            doc["model"] = DATED[doc["model"]]
        return Reply.json(reply.status, doc, reply.headers)


class DatedAnthropic(Dated, AnthropicServer):
    pass


class DatedOpenAI(Dated, OpenAIServer):
    pass


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-loop")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loop")


def _client(srv: Any, store: CallCache) -> ModelClient:
    openai = isinstance(srv, OpenAIServer)
    config = ModelConfig(
        provider="openai" if openai else "anthropic",
        model="gpt-x" if openai else "claude-x",
        base_url=f"{srv.url}/v1" if openai else srv.url,
    )
    return ModelClient(
        "m",
        config,
        Shared(
            store=store, shared_calls=SharedCalls(), bill=BillWriter(bill_dir(store.root), "run")
        ),
    )


def _ask(c: ModelClient) -> str:
    async def go() -> str:
        try:
            return await c.text([ChatMessage("user", "hello")], stage="t")
        finally:
            await c.aclose()

    return asyncio.run(go())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("server", [DatedAnthropic, DatedOpenAI])
def test_the_served_snapshot_is_in_the_bill_and_the_store(server: Any, tmp_path: Path) -> None:
    store = CallCache(tmp_path / "cache")
    with server().start() as srv:
        _ask(_client(srv, store))
        served = DATED["gpt-x" if server is DatedOpenAI else "claude-x"]
        (line,) = list(charges(bill_dir(store.root), run="run"))
        assert line.served == served
        (entry,) = (store.root / "packs/0.jsonl").read_bytes().splitlines()
        assert orjson.loads(entry)["served"] == served
        # a later run takes the answer from the store, and still knows who gave it
        hit = CallCache(store.root).get(orjson.loads(entry)["key"])
        assert hit is not None and hit.meta["model"] == served
        assert srv.count == 1


@pytest.mark.timeout(30)
def test_entries_and_bill_lines_naming_no_served_model_read(tmp_path: Path) -> None:
    store = CallCache(tmp_path / "cache")
    key = "ab" * 32
    store.put(key, Response(text="hi", input_tokens=3, output_tokens=1))
    hit = store.get(key)
    assert hit is not None and hit.text == "hi" and "model" not in hit.meta
    line = b'{"t":1.0,"run":"r","model":"m","stage":"s","in":1,"out":2,"cost":0.0}'
    charge = Charge.parse(line)
    assert charge is not None and charge.served is None
    # and a line with it reads back as written
    again = Charge.parse(
        Charge(**{**charge.__dict__, "served": "claude-x-20250929"}).line()  # type: ignore[arg-type]
    )
    assert again is not None and again.served == "claude-x-20250929"


@pytest.mark.timeout(30)
def test_an_answer_naming_no_model_stores_none(tmp_path: Path) -> None:
    store = CallCache(tmp_path / "cache")
    store.put("cd" * 32, Response(text="x", input_tokens=1, output_tokens=1))
    assert "served" not in orjson.loads(store.read("cd" * 32) or b"{}")
