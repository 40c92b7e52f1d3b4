"""Issue 25: a chat service's answers under its reply paths, fuzzed with Hypothesis.

A loopback service answers each turn (and the session's `open`) with a generated body:
near-valid JSON answers with fields set to any value or removed, any JSON document, and
bytes that are no JSON. Every turn ends in a reply (text) or in the project's own error
(ProviderError, BlockedError) naming the request and the path it read, never in another
exception. 300 answers here; 10,000 under the slow mark.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import strategies as st

from kora.llm.base import BlockedError, ChatMessage, ProviderError
from kora.llm.providers.service import ServiceTarget
from kora.llm.retry import RetryPolicy
from kora.llm.settings.config import ModelConfig
from tests.fuzzing import MANY, VALUES, encoded, fuzz, mutated
from tests.misbehaving import Misbehaving, body

ANSWER = {
    "choices": [{"message": {"role": "assistant", "content": "hello"}}],
    "session": {"id": "s-1"},
    "blockedReason": None,
    "usage": {"in": 10, "out": 5},
}
REPLY_PATHS = ["choices.0.message.content", "choices.-1.message.content", "reply", "0", "a..b"]
ODD_PATHS = ["choices.²", "choices.٣", "choices.-0", "choices.99999999999999999999"]


def _target(url: str, reply: str | None, with_open: bool) -> ServiceTarget:
    http: dict[str, Any] = {
        "turn": {
            "url": "/turn",
            "body": {"q": "{{ message }}"},
            "reply": reply,
            "blocked": "blockedReason",
            "input_tokens": "usage.in",
            "output_tokens": "usage.out",
        }
    }
    if with_open:
        http["open"] = {"url": "/open", "session_id": "session.id", "blocked": "blockedReason"}
    config = ModelConfig.model_validate({"provider": "http", "base_url": url, "http": http})
    return ServiceTarget("svc", config, retry_policy=RetryPolicy(attempts=1))


def _fuzz(examples: int) -> None:
    answers = st.one_of(
        encoded(mutated(ANSWER)),
        encoded(mutated(ANSWER)),
        encoded(VALUES),
        st.binary(max_size=50),
        st.sampled_from([b"", b"null", b"[]", b"{}", b'{"reply": "\\ud800"}', b"\xff"]),
    )
    loop = asyncio.new_event_loop()  # one loop, one client per target: thousands of turns
    targets: dict[tuple[str | None, bool], ServiceTarget] = {}
    with Misbehaving() as srv:

        def check(turn: bytes, opened: bytes, reply: str | None, with_open: bool) -> None:
            srv.behaviours.clear()
            if with_open:
                srv.next(body(opened))
            srv.next(body(turn))
            target = targets.get((reply, with_open))
            if target is None:
                target = targets[(reply, with_open)] = _target(srv.url, reply, with_open)

            async def run() -> Any:
                session = await target.open_session("10to12")
                return await session.reply([ChatMessage("user", "hi")])

            try:
                resp = loop.run_until_complete(run())
            except (ProviderError, BlockedError) as exc:
                msg = str(exc)
                named = [p for p in (reply, "session.id") if p] + ["blocked", "HTTP"]
                assert (
                    "the turn answer" in msg
                    or "the open answer" in msg
                    or any(n in msg for n in named)
                ), msg
                return
            assert isinstance(resp.text, str)
            resp.text.encode()  # valid Unicode: a file can hold it
            assert resp.input_tokens >= 0 and resp.output_tokens >= 0

        fuzz(
            check,
            examples,
            turn=answers,
            opened=answers,
            reply=st.sampled_from([None, *REPLY_PATHS, *ODD_PATHS]),
            with_open=st.booleans(),
        )
        for target in targets.values():
            loop.run_until_complete(target.aclose())
    loop.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_fuzzed_service_answers() -> None:
    _fuzz(300)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_fuzzed_service_answers_many() -> None:
    _fuzz(MANY)


@pytest.mark.timeout(30)
def test_the_example_answer_is_read() -> None:
    with Misbehaving() as srv:
        srv.every(body(json.dumps(ANSWER).encode()))
        target = _target(srv.url, "choices.0.message.content", True)

        async def run() -> Any:
            session = await target.open_session("10to12")
            resp = await session.reply([ChatMessage("user", "hi")])
            await target.aclose()
            return session, resp

        session, resp = asyncio.run(run())
    assert resp.text == "hello" and session.session_id == "s-1"
    assert (resp.input_tokens, resp.output_tokens) == (10, 5)


@pytest.mark.timeout(30)
def test_a_reply_path_with_non_ascii_digits_is_no_index() -> None:
    """Found by fuzzing: `"²".isdigit()` is true and `int("²")` raises."""
    from kora.llm.settings.service_config import find

    assert find({"a": ["x", "y"]}, "a.1") == "y"
    assert find({"a": ["x", "y"]}, "a.²") is None and find({"a": ["x"]}, "a.٣") is None
