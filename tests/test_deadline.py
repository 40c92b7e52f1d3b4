"""Issue 25, item 1: `timeout` bounds the whole call, connect to last byte.

A server that answers 200 and then sends a byte at a time, never the last, resets a
per-read timeout forever. Against such a server every path a run takes (the Anthropic
SDK, the OpenAI-compatible client, a chat service's requests, batch polling, `kora
ping`) must give up at the model's `timeout`, fail the attempt (retried, then recorded)
and name the deadline."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from kora.commands.main import main as kora_main
from kora.llm.base import ChatMessage, ProviderError, Request
from kora.llm.client import ModelClient
from kora.llm.providers.batch import BatchQueue
from kora.llm.providers.factories import create_provider
from kora.llm.providers.service import ServiceTarget
from kora.llm.retry import RetryPolicy
from kora.llm.settings.config import ModelConfig
from tests.loopback import AnthropicServer
from tests.misbehaving import Misbehaving, trickle

TIMEOUT = 0.5
TWO_TRIES = RetryPolicy(attempts=2)
ROOT = Path(__file__).resolve().parents[1]


def _llm(provider: str, url: str) -> ModelClient:
    base = url if provider == "anthropic" else f"{url}/v1"
    config = ModelConfig(provider=provider, model="m", base_url=base, timeout=TIMEOUT)  # type: ignore[arg-type]
    return ModelClient("slow", config, retry_policy=TWO_TRIES)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_trickling_llm_fails_at_the_deadline(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k-anthropic")
    with Misbehaving() as srv:
        srv.every(trickle())
        client = _llm(provider, srv.url)

        async def call() -> str:
            try:
                return await client.text([ChatMessage("user", "hi")], stage="test")
            finally:
                await client.aclose()

        with pytest.raises(ProviderError) as info:
            asyncio.run(call())
        assert srv.count == 2  # retried, then failed
    assert "no complete answer within the 0.5 s deadline (timeout)" in str(info.value)
    assert info.value.retryable
    totals = client.usage.totals()
    assert totals["calls"] == 1 and totals["failures"] == 1  # recorded and counted


def _service(url: str, **http: Any) -> ServiceTarget:
    config = ModelConfig.model_validate(
        {
            "provider": "http",
            "base_url": url,
            "timeout": TIMEOUT,
            "http": {"turn": {"url": "/chat", "body": {"q": "{{ message }}"}, **http}},
        }
    )
    return ServiceTarget("svc", config, retry_policy=TWO_TRIES)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("reply", [None, "reply"], ids=["whole-body", "reply-path"])
def test_a_trickling_chat_service_fails_at_the_deadline(reply: str | None) -> None:
    with Misbehaving() as srv:
        srv.every(trickle())
        target = _service(srv.url, reply=reply)

        async def turn() -> None:
            try:
                session = await target.open_session("10to12")
                await session.reply([ChatMessage("user", "hi")])
            finally:
                await target.aclose()

        with pytest.raises(ProviderError, match=r"within the 0\.5 s deadline \(timeout\)"):
            asyncio.run(turn())
        # both attempts reached the server (which, on a loaded machine, may read the second
        # only after the client has given up on it)
        assert srv.wait_for(lambda s: s.count == 2, timeout=20), srv.count


class _TricklingPolls(AnthropicServer):
    """Takes batches as the API does, then trickles every look at one."""

    async def _handle(self, request: Any) -> Any:
        if request.method == "GET" and request.path.startswith("/v1/messages/batches/"):
            return await trickle()(request, self)  # type: ignore[arg-type]
        return await super()._handle(request)

    async def serve(self) -> None:
        self.never = asyncio.Event()
        await super().serve()


@pytest.mark.timeout(30)
def test_a_trickling_batch_poll_fails_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setattr("kora.llm.providers.batch.MAX_MISSES", 1)
    with _TricklingPolls() as srv:
        config = ModelConfig(provider="anthropic", model="m", base_url=srv.url, timeout=TIMEOUT)
        provider: Any = create_provider("batcher", config)
        queue = BatchQueue(provider, tmp_path / "batches", window=0.0, poll=0.0)
        request = Request(messages=(ChatMessage("user", "hi"),))

        async def ask() -> None:
            try:
                await queue.ask("k1", request)
            finally:
                await queue.aclose()
                await provider.aclose()

        with pytest.raises(ProviderError, match=r"within the 0\.5 s deadline \(timeout\)"):
            asyncio.run(ask())


@pytest.mark.timeout(60)
def test_kora_ping_gives_up_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    with Misbehaving() as srv:
        srv.every(trickle())
        overlay = tmp_path / "slow.yaml"
        overlay.write_text(
            yaml.safe_dump(
                {
                    "models": {
                        "slow": {
                            "provider": "http",
                            "base_url": srv.url,
                            "timeout": TIMEOUT,
                            "http": {"turn": {"url": "/chat", "body": {"q": "{{ message }}"}}},
                        }
                    },
                    "targets": {"slow-target": {"model": "slow", "prompts": ["child"]}},
                }
            )
        )
        rc = kora_main(["ping", "slow-target", "--configfile", str(overlay), "--target-only"])
    out = capsys.readouterr()
    assert rc == 1
    assert "FAILED" in out.out and "within the 0.5 s deadline (timeout)" in out.out
