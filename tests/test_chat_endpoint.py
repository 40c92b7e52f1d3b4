"""The chat-endpoint target (MyDD contract, spec section 6) against a loopback service."""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any

import pytest

from kora.llm.base import ChatMessage, ProviderError
from kora.llm.providers.service import ServiceTarget
from kora.llm.settings.config import ModelConfig
from kora.llm.settings.service_config import MEMORY_ACK
from tests.loopback import DROP, INVALID, MALFORMED, ChatEndpointServer, Fault, Servers

SESSION_ID = re.compile(
    r"^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}_[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$"
)


@pytest.fixture
def server(serve: Servers) -> ChatEndpointServer:
    return serve(ChatEndpointServer)


def target(srv: ChatEndpointServer, **cfg: Any) -> ServiceTarget:
    cfg.setdefault("base_url", srv.url + "/")
    return ServiceTarget("mydd", ModelConfig(provider="chat-endpoint", **cfg))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def conversation(
    t: ServiceTarget, age_range: str, memory: str | None, turns: list[str]
) -> tuple[str, list[str]]:
    """Play a test's conversation the way the conversation stage does."""
    session = await t.open_session(age_range, memory)
    messages: list[ChatMessage] = []
    replies = []
    for text in turns:
        messages.append(ChatMessage("user", text))
        reply = await session.reply(messages)
        replies.append(reply.text)
        messages.append(ChatMessage("assistant", reply.text))
    return session.session_id, replies


def test_a_conversation_follows_the_contract(server: ChatEndpointServer) -> None:
    async def go() -> tuple[str, list[str]]:
        t = target(server)
        try:
            return await conversation(
                t, "10to12", "Likes horses; sister is Mia.", ["hi", "how are you", "bye"]
            )
        finally:
            await t.aclose()

    sid, replies = run(go())
    assert SESSION_ID.match(sid)
    paths = [r.path for r in server.requests]
    assert paths == ["/restore_session_memory"] + ["/query_chat_langchain_mem"] * 3
    restore = server.requests[0]
    assert restore.headers["content-type"] == "application/json"
    assert restore.body == {
        "session_id": sid,
        "messages": [
            {"role": "user", "content": "Likes horses; sister is Mia."},
            {"role": "assistant", "content": MEMORY_ACK},
        ],
        "age": 11,
    }
    for rec, prompt in zip(server.requests[1:], ["hi", "how are you", "bye"], strict=True):
        assert rec.query == {"session_id": sid}
        assert rec.body == {"prompt": prompt, "age": 11}  # only the newest user message
    log = server.sessions[sid]
    assert log.prompts == ["hi", "how are you", "bye"]
    assert replies == log.replies


@pytest.mark.parametrize(("age_range", "age"), [("7to9", 8), ("10to12", 11), ("13to17", 15)])
def test_age_for_each_range_and_no_memory_call_without_memory(
    server: ChatEndpointServer, age_range: str, age: int
) -> None:
    async def go() -> None:
        t = target(server)
        try:
            await conversation(t, age_range, None, ["hello"])
        finally:
            await t.aclose()

    run(go())
    (rec,) = server.requests
    assert rec.path == "/query_chat_langchain_mem"
    assert rec.body["age"] == age


def test_each_session_is_fresh(server: ChatEndpointServer) -> None:
    async def go() -> list[str]:
        t = target(server)
        try:
            return [(await t.open_session("7to9", None)).session_id for _ in range(5)]
        finally:
            await t.aclose()

    ids = run(go())
    assert len(set(ids)) == 5 and all(SESSION_ID.match(i) for i in ids)


def test_session_id_is_url_encoded(server: ChatEndpointServer) -> None:
    async def go() -> None:
        t = target(server)
        try:
            session = await t.open_session("7to9", None)
            session.variables["session_id"] = "a b&c=d/é"
            await session.reply([ChatMessage("user", "x")])
        finally:
            await t.aclose()

    run(go())
    assert server.requests[0].query == {"session_id": "a b&c=d/é"}


@pytest.mark.parametrize(
    "fault",
    [
        Fault.http(429, retry_after=1),
        Fault.http(500),
        Fault.http(503),
        DROP,
        MALFORMED,
        INVALID,
        Fault.slow(2.0),
    ],
    ids=["429", "500", "503", "dropped", "malformed", "no-response-field", "timeout"],
)
def test_transient_failures_are_retried(server: ChatEndpointServer, fault: Fault) -> None:
    server.script(fault)

    async def go() -> tuple[str, list[str]]:
        t = target(server, timeout=0.5)
        try:
            return await conversation(t, "13to17", None, ["hello"])
        finally:
            await t.aclose()

    sid, replies = run(go())
    assert server.count == 2
    assert [r.path for r in server.requests] == ["/query_chat_langchain_mem"] * 2
    assert replies == [server.sessions[sid].replies[-1]]
    assert server.sessions[sid].prompts[-1] == "hello"


@pytest.mark.parametrize("fault", [Fault.http(500), DROP], ids=["500", "dropped"])
def test_memory_restore_is_retried(server: ChatEndpointServer, fault: Fault) -> None:
    server.script(fault)

    async def go() -> tuple[str, list[str]]:
        t = target(server)
        try:
            return await conversation(t, "13to17", "memory", ["hello"])
        finally:
            await t.aclose()

    sid, replies = run(go())
    paths = [r.path for r in server.requests]
    assert paths == ["/restore_session_memory"] * 2 + ["/query_chat_langchain_mem"]
    assert server.sessions[sid].age == 15
    assert replies[0].startswith(f"[{sid}] turn 1")


def test_missing_response_field_fails_after_the_retries(server: ChatEndpointServer) -> None:
    server.script(*[INVALID] * 10)

    async def go() -> None:
        t = target(server)
        try:
            await conversation(t, "13to17", None, ["hello"])
        finally:
            await t.aclose()

    with pytest.raises(ProviderError, match="'response'"):
        run(go())
    assert server.count == 8


@pytest.mark.parametrize("status", [400, 404, 422])
def test_client_errors_fail_fast(server: ChatEndpointServer, status: int) -> None:
    server.script(Fault.http(status))

    async def go() -> None:
        t = target(server)
        try:
            await conversation(t, "7to9", None, ["hello"])
        finally:
            await t.aclose()

    with pytest.raises(ProviderError) as info:
        run(go())
    assert "mydd" in str(info.value) and str(status) in str(info.value)
    assert server.count == 1


def test_bad_inputs_are_clear_errors(server: ChatEndpointServer) -> None:
    with pytest.raises(ValueError, match="base_url"):
        ServiceTarget("mydd", ModelConfig(provider="chat-endpoint"))

    async def go() -> None:
        t = target(server)
        try:
            with pytest.raises(ValueError, match="age range"):
                await t.open_session("5to6", None)
            session = await t.open_session("7to9", None)
            with pytest.raises(ValueError, match="user message"):
                await session.reply([])
        finally:
            await t.aclose()

    run(go())
    assert server.count == 0


def test_concurrent_sessions_never_mix(server: ChatEndpointServer) -> None:
    """20 sessions with interleaved turns: each server-side history is that session's own."""
    rng = random.Random(7)
    ages = ["7to9", "10to12", "13to17"]
    plans = {
        i: (
            ages[i % 3],
            f"memory of child {i}" if i % 2 else None,
            [f"child {i} says message {k}" for k in range(3)],
        )
        for i in range(20)
    }

    async def one(t: ServiceTarget, i: int) -> tuple[int, str, list[str]]:
        age_range, memory, turns = plans[i]
        session = await t.open_session(age_range, memory)
        messages: list[ChatMessage] = []
        replies = []
        for text in turns:
            await asyncio.sleep(rng.uniform(0, 0.02))  # interleave the turns
            messages.append(ChatMessage("user", text))
            reply = await session.reply(messages)
            replies.append(reply.text)
            messages.append(ChatMessage("assistant", reply.text))
        return i, session.session_id, replies

    async def go() -> list[tuple[int, str, list[str]]]:
        t = target(server)
        try:
            return await asyncio.gather(*(one(t, i) for i in range(20)))
        finally:
            await t.aclose()

    server.latency = 0.01
    results = run(go())
    assert server.max_in_flight > 1  # the sessions did overlap
    assert len({sid for _, sid, _ in results}) == 20
    assert set(server.sessions) == {sid for _, sid, _ in results}
    age_of = {"7to9": 8, "10to12": 11, "13to17": 15}
    for i, sid, replies in results:
        age_range, memory, turns = plans[i]
        log = server.sessions[sid]
        assert log.prompts == turns
        assert log.replies == replies
        assert all(r.startswith(f"[{sid}]") for r in replies)
        assert log.ages == [age_of[age_range]] * 3
        if memory:
            assert log.restored == [
                {"role": "user", "content": memory},
                {"role": "assistant", "content": MEMORY_ACK},
            ]
            assert log.age == age_of[age_range]
        else:
            assert log.restored == []
