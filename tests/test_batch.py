"""Batch mode through the real `anthropic` SDK against a loopback Message Batches API,
and the project's aiohttp client against a loopback OpenAI Batch API (files, batches,
output and error files): one batch for many calls, half price, per-item failures, and a
killed run that resumes its batch instead of paying twice."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from kora.llm.base import ChatMessage, ProviderError
from kora.llm.client import ModelClient
from kora.llm.money.bill import BillWriter, bill_dir, total
from kora.llm.money.usage import Usage
from kora.llm.providers import batch as batch_mod
from kora.llm.providers.factories import Shared
from kora.llm.retry import RetryPolicy
from kora.llm.settings.config import ModelConfig, Price
from kora.llm.store.cache import CallCache
from tests.loopback import AnthropicServer, OpenAIServer


class Answer(BaseModel):
    answer: str


PRICE = Price(input=3.0, output=15.0)
FAST = RetryPolicy(attempts=3, initial=0.01, maximum=0.05)


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-loop")
    monkeypatch.setattr(batch_mod, "WINDOW", 0.05)
    monkeypatch.setattr(batch_mod, "POLL", 0.05)
    batch_mod._QUEUES.clear()


def _client(srv: Any, store: Path, usage: Usage, *, batch: bool) -> ModelClient:
    openai = isinstance(srv, OpenAIServer)
    cfg = ModelConfig(
        provider="openai" if openai else "anthropic",
        model="gpt-x" if openai else "claude-sonnet-5-5",
        base_url=f"{srv.url}/v1" if openai else srv.url,
        price=PRICE,
        batch=batch,
        prompt_cache=False,
    )
    shared = Shared(store=CallCache(store), usage=usage, bill=BillWriter(bill_dir(store), "run"))
    return ModelClient("judge", cfg, shared, retry_policy=FAST)


def _ask_all(client: ModelClient, n: int) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return await asyncio.gather(
                *(
                    client.structured([ChatMessage("user", f"question {i}")], Answer, stage="t")
                    for i in range(n)
                ),
                return_exceptions=True,
            )
        finally:
            await client.aclose()

    return asyncio.run(go())


def _creates(srv: Any) -> int:
    path = "/v1/batches" if isinstance(srv, OpenAIServer) else "/v1/messages/batches"
    return sum(1 for r in srv.requests if r.method == "POST" and r.path == path)


def _single(srv: Any) -> int:
    path = "/v1/chat/completions" if isinstance(srv, OpenAIServer) else "/v1/messages"
    return sum(1 for r in srv.requests if r.path == path)


SERVERS = {"anthropic": AnthropicServer, "openai": OpenAIServer}


def _echo(rec: Any) -> dict[str, str]:
    messages = rec.body["messages"]
    return {"answer": next(m["content"] for m in messages if m["role"] == "user")}


@pytest.mark.slow
@pytest.mark.parametrize("provider", sorted(SERVERS))
def test_many_calls_go_out_in_one_batch_at_half_price(provider: str, tmp_path: Path) -> None:
    with SERVERS[provider](structured=_echo) as srv:
        batched = Usage()
        answers = _ask_all(_client(srv, tmp_path / "a" / "cache", batched, batch=True), 12)
        creates = _creates(srv)
        plain = Usage()
        again = _ask_all(_client(srv, tmp_path / "b" / "cache", plain, batch=False), 12)
        single = _single(srv)
    assert [a.answer for a in answers] == [f"question {i}" for i in range(12)]
    assert [a.answer for a in again] == [a.answer for a in answers]
    assert creates == 1 and single == 12
    b, p = total(tmp_path / "a" / "bill"), total(tmp_path / "b" / "bill")
    assert (b.input_tokens, b.output_tokens) == (p.input_tokens, p.output_tokens)
    assert b.cost == pytest.approx(p.cost / 2)
    # the answers are in the call store: asking again pays nothing and sends nothing
    stored = Usage()
    with SERVERS[provider]() as srv2:
        _ask_all(_client(srv2, tmp_path / "a" / "cache", stored, batch=True), 12)
        assert srv2.count == 0
    assert stored.totals()["cached"] == 12


@pytest.mark.slow
@pytest.mark.parametrize("provider", sorted(SERVERS))
def test_an_expired_request_is_asked_again_and_an_errored_one_fails_alone(
    provider: str, tmp_path: Path
) -> None:
    with SERVERS[provider](structured=lambda rec: {"answer": "ok"}) as srv:
        _ask_all(_client(srv, tmp_path / "warm", Usage(), batch=True), 1)  # the batch API is up
        srv.batch_faults.extend(["expired", "errored"])
        before = _creates(srv)
        out = _ask_all(_client(srv, tmp_path / "cache", Usage(), batch=True), 4)
        creates = _creates(srv) - before
    failed = [o for o in out if isinstance(o, BaseException)]
    assert len(failed) == 1 and isinstance(failed[0], ProviderError)
    assert "invalid_request_error" in str(failed[0]) or "scripted failure" in str(failed[0])
    assert sum(1 for o in out if not isinstance(o, BaseException)) == 3
    assert creates == 2  # the expired one went out again, in a second batch


@pytest.mark.parametrize("provider", sorted(SERVERS))
def test_a_killed_run_waits_for_its_batch_instead_of_paying_twice(
    provider: str, tmp_path: Path
) -> None:
    store = tmp_path / ".kora" / "cache"
    with SERVERS[provider](structured=lambda rec: {"answer": "late"}) as srv:
        srv.batch_latency = 0.6

        async def killed() -> None:
            client = _client(srv, store, Usage(), batch=True)
            task = asyncio.gather(
                *(client.structured([ChatMessage("user", f"question {i}")], Answer, stage="t")
                  for i in range(5))
            )  # fmt: skip
            # sent, not ended (its answers come 0.6 s after it is made): killed here
            batches = tmp_path / ".kora" / "batches"
            while not any("in_progress" in f.read_text() for f in batches.glob("*.json")):
                await asyncio.sleep(0.01)  # polled: what counts is the file, not the time
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(killed())
        pending = list((tmp_path / ".kora" / "batches").glob("*.json"))
        assert len(pending) == 1 and json.loads(pending[0].read_text())["state"] == "in_progress"
        batch_mod._QUEUES.clear()  # a new process
        usage = Usage()
        second = _client(srv, store, usage, batch=True)
        out = _ask_all(second, 5)
        creates = _creates(srv)
    assert [o.answer for o in out] == ["late"] * 5
    assert creates == 1  # the second run sent nothing new

    async def later() -> None:  # a later run: the batch is done, its answers stored
        batch_mod.queue_for(second.provider, pending[0].parent, CallCache(store))._resume()  # type: ignore[arg-type]

    batch_mod._QUEUES.clear()
    asyncio.run(later())
    assert json.loads(pending[0].read_text())["state"] == "ended"


def test_an_answer_made_ahead_in_a_batch_is_billed_at_half_price_to_its_job(
    tmp_path: Path,
) -> None:
    """The broker makes calls ahead of their jobs, at the batch's price; the job that
    claims one from the call store counts it as its call, not one from the store."""
    from kora.llm.shared_calls import SharedCalls

    with AnthropicServer(structured=lambda rec: {"answer": "x"}) as srv:
        shared_calls = SharedCalls()
        ahead = _client(srv, tmp_path / "cache", Usage(), batch=True)
        ahead.shared_calls, ahead.ahead = shared_calls, True
        _ask_all(ahead, 3)
        job_usage = Usage()
        job = _client(srv, tmp_path / "cache", job_usage, batch=True)
        job.shared_calls = shared_calls
        _ask_all(job, 3)
        plain_usage = Usage()
        _ask_all(_client(srv, tmp_path / "plain" / "cache", plain_usage, batch=False), 3)
    t = job_usage.totals()
    assert t["calls"] == 3 and t["cached"] == 0  # paid for the job that asked
    ahead_bill = total(tmp_path / "bill")
    assert ahead_bill.calls == 3
    assert ahead_bill.cost == pytest.approx(total(tmp_path / "plain" / "bill").cost / 2)


def test_the_progress_line_counts_the_runs_batches(tmp_path: Path) -> None:
    from kora.run.jobs.progress import Monitor

    folder = tmp_path / "batches"
    folder.mkdir()
    for i, state in enumerate(["in_progress", "in_progress", "ended"]):
        (folder / f"b{i}.json").write_text(json.dumps({"id": f"b{i}", "state": state}))
    monitor = Monitor(tmp_path, "run-x", tmp_path / "bill")
    monitor.batches = folder
    monitor.started = 0.0
    monitor.dir.mkdir(parents=True)
    monitor.print()
    assert "batches: 2 in progress, 1 done" in monitor._last


def test_a_batch_that_cannot_be_read_for_a_while_is_waited_for(tmp_path: Path) -> None:
    """Hours-long batches meet network blips: failed looks are tried again, and the
    answers still come from the one batch sent."""
    with AnthropicServer(structured=lambda rec: {"answer": "x"}) as srv:
        client = _client(srv, tmp_path / "cache", Usage(), batch=True)
        real = client.provider.batch_ended  # type: ignore[attr-defined]
        failures = iter([True, True, False])

        async def flaky(batch_id: str) -> bool:
            if next(failures, False):
                raise ProviderError("connection reset", status=None)
            return bool(await real(batch_id))

        client.provider.batch_ended = flaky  # type: ignore[attr-defined]
        out = _ask_all(client, 3)
        assert _creates(srv) == 1
    assert [o.answer for o in out] == ["x"] * 3
