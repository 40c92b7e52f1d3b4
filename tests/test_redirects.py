"""Issue 25, item 6: a redirect or an empty body is not an empty reply.

For a chat service whose whole answer body is the reply, a 302 or a 200 without a body
used to count as the reply "" and the run succeeded. Both are failed attempts (retried,
then recorded) whose message gives the status (and the Location); following redirects
is the model's `follow_redirects`, off by default."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kora.llm.base import ChatMessage, ProviderError, Response
from kora.llm.providers.service import ServiceTarget
from kora.llm.retry import RetryPolicy
from kora.llm.settings.config import ModelConfig
from tests.misbehaving import Misbehaving, body, redirect

THREE_TRIES = RetryPolicy(attempts=3)


def _target(url: str, reply: str | None = None, **model: Any) -> ServiceTarget:
    config = ModelConfig.model_validate(
        {"provider": "http", "base_url": url, **model,
         "http": {"turn": {"url": "/chat", "body": {"q": "{{ message }}"}, "reply": reply}}}
    )  # fmt: skip
    return ServiceTarget("svc", config, retry_policy=THREE_TRIES)


def _turn(target: ServiceTarget) -> Response:
    async def run() -> Response:
        try:
            session = await target.open_session(None)
            return await session.reply([ChatMessage("user", "hi")])
        finally:
            await target.aclose()

    return asyncio.run(run())


@pytest.mark.timeout(30)
@pytest.mark.parametrize("reply", [None, "reply"], ids=["whole-body", "reply-path"])
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failed_attempt_naming_where_it_points(
    status: int, reply: str | None
) -> None:
    with Misbehaving() as srv:
        srv.every(redirect(status, "https://login.example/sso?next=/chat"))
        with pytest.raises(ProviderError) as info:
            _turn(_target(srv.url, reply))
        assert srv.count == 3  # retried, then failed
    msg = str(info.value)
    assert f"HTTP {status}" in msg and "https://login.example/sso?next=/chat" in msg
    assert "follow_redirects" in msg
    assert info.value.status == status


@pytest.mark.timeout(30)
@pytest.mark.parametrize("status", [200, 201, 204])
def test_an_answer_without_a_body_is_no_reply(status: int) -> None:
    with Misbehaving() as srv:
        srv.every(body(b"", status=status, content_type="text/plain"))
        with pytest.raises(ProviderError) as info:
            _turn(_target(srv.url))
        assert srv.count == 3
    assert f"HTTP {status}" in str(info.value) and "no body" in str(info.value)


@pytest.mark.timeout(30)
def test_a_redirect_is_followed_when_the_model_says_so() -> None:
    with Misbehaving() as srv:
        srv.next(redirect(302, "/elsewhere"))
        srv.every(body(b"hello from elsewhere", content_type="text/plain"))
        reply = _turn(_target(srv.url, follow_redirects=True))
        paths = [r.path for r in srv.requests]
    assert reply.text == "hello from elsewhere"
    assert paths == ["/chat", "/elsewhere"]


@pytest.mark.timeout(30)
def test_a_reply_that_is_only_whitespace_is_still_the_targets_reply() -> None:
    """A body that is there but blank is what the target said (judged as it stands)."""
    with Misbehaving() as srv:
        srv.every(body(b" \n", content_type="text/plain"))
        assert _turn(_target(srv.url)).text == " \n"
