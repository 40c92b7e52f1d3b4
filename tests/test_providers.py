"""The Anthropic (real SDK) and OpenAI-compatible (aiohttp) providers against loopback
servers speaking their wire protocols, always through `ModelClient`."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from kora.llm.answers import StructuredOutputError
from kora.llm.base import ChatMessage, ProviderError
from kora.llm.client import ModelClient
from kora.llm.money.bill import BillWriter
from kora.llm.providers.factories import Shared
from kora.llm.registry import KINDS
from kora.llm.settings.config import ModelConfig
from tests.loopback import (
    DROP,
    INVALID,
    MALFORMED,
    AnthropicServer,
    Ended,
    Fault,
    OpenAIServer,
    Recorded,
    Servers,
)

KEY = "sk-test-SECRET-0123456789"
ProviderName = Literal["anthropic", "openai"]


class Verdict(BaseModel):
    grade: Literal["failing", "adequate", "exemplary"]
    reasons: str = Field(min_length=5, max_length=200)
    count: int = Field(ge=0)


GOOD = {"grade": "adequate", "reasons": "the answer redirected the child", "count": 1}


def _good(_: Recorded) -> dict[str, Any]:
    return dict(GOOD)


Server = AnthropicServer | OpenAIServer


@pytest.fixture(params=["anthropic", "openai"])
def provider(request: pytest.FixtureRequest) -> ProviderName:
    name: ProviderName = request.param
    return name


@pytest.fixture
def server(provider: ProviderName, monkeypatch: pytest.MonkeyPatch, serve: Servers) -> Server:
    cls = AnthropicServer if provider == "anthropic" else OpenAIServer
    env = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
    monkeypatch.setenv(env, KEY)
    return serve(cls, api_key=KEY, structured=_good)


def base_url(provider: ProviderName, srv: Server) -> str:
    return srv.url if provider == "anthropic" else f"{srv.url}/v1"


def make_client(provider: ProviderName, srv: Server, **cfg: Any) -> ModelClient:
    cfg.setdefault("base_url", base_url(provider, srv))
    config = ModelConfig(provider=provider, model="test-model-1", **cfg)
    return ModelClient("judge-x", config, Shared(bill=BillWriter(None, "t")))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def text_call(client: ModelClient, text: str = "hello", **kw: Any) -> str:
    try:
        return await client.text([ChatMessage("user", text)], stage="test", **kw)
    finally:
        await client.aclose()


async def structured_call(client: ModelClient) -> Verdict:
    try:
        return await client.structured([ChatMessage("user", "grade it")], Verdict, stage="test")
    finally:
        await client.aclose()


def test_text_call(provider: ProviderName, server: Server) -> None:
    client = make_client(provider, server, temperature=0.3, max_tokens=123)
    assert run(text_call(client, "hi there", system="be kind")) == "echo: hi there"
    (rec,) = server.requests
    body = rec.body
    assert body["model"] == "test-model-1"
    assert body.get("temperature") == 0.3
    if provider == "anthropic":
        assert rec.path == "/v1/messages"
        assert body["system"] == "be kind"
        assert body["messages"] == [{"role": "user", "content": "hi there"}]
        assert body["max_tokens"] == 123
        assert "tools" not in body
    else:
        assert rec.path == "/v1/chat/completions"
        assert rec.headers["authorization"] == f"Bearer {KEY}"
        assert body["messages"] == [
            {"role": "system", "content": "be kind"},
            {"role": "user", "content": "hi there"},
        ]
        assert body["max_tokens"] == 123
        assert "response_format" not in body
    assert client.usage.totals()["calls"] == 1
    assert client.payer.bill is not None
    billed = client.payer.bill.sums[("judge-x", "test")]  # the answer's, as the bill has it
    assert billed.calls == 1 and billed.input_tokens > 0 and billed.output_tokens > 0


def test_structured_call(provider: ProviderName, server: Server) -> None:
    verdict = run(structured_call(make_client(provider, server)))
    assert verdict == Verdict.model_validate(GOOD)
    body = server.requests[0].body
    schema = Verdict.model_json_schema()
    if provider == "anthropic":
        (tool,) = body["tools"]
        assert tool["input_schema"] == schema
        assert body["tool_choice"] == {"type": "tool", "name": tool["name"]}
    else:
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        assert fmt["json_schema"]["schema"] == schema
        assert fmt["json_schema"]["strict"] is False
        assert fmt["json_schema"]["name"] == "Verdict"


@pytest.mark.parametrize(
    "fault",
    [
        Fault.http(429, retry_after=2),
        Fault.http(500),
        Fault.http(529),
        Fault.http(503),
        Fault.slow(3.0),
        DROP,
        MALFORMED,
    ],
    ids=["429", "500", "529", "503", "timeout", "dropped", "malformed"],
)
def test_transient_failures_are_retried(
    provider: ProviderName, server: Server, fault: Fault
) -> None:
    server.script(fault, fault)
    client = make_client(provider, server, timeout=0.5)
    assert run(text_call(client)) == "echo: hello"
    assert server.count == 3
    assert client.usage.totals()["failures"] == 0


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_fail_fast(provider: ProviderName, server: Server, status: int) -> None:
    server.script(Fault.http(status, message=f"rejected key {KEY}"))
    with pytest.raises(ProviderError) as info:
        run(text_call(make_client(provider, server)))
    msg = str(info.value)
    assert "judge-x" in msg and "test-model-1" in msg and str(status) in msg
    assert KEY not in msg
    assert info.value.status == status
    assert server.count == 1


def test_wrong_key_fails_fast_without_leaking_it(
    provider: ProviderName, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "sk-wrong-KEY-9876543210"
    monkeypatch.setenv("ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY", wrong)
    with pytest.raises(ProviderError) as info:
        run(text_call(make_client(provider, server)))
    msg = str(info.value)
    assert "401" in msg and "judge-x" in msg
    assert wrong not in msg and KEY not in msg
    assert server.count == 1  # the server echoed the key back: it was masked


def test_retries_are_bounded(provider: ProviderName, server: Server) -> None:
    server.script(*[Fault.http(500)] * 20)
    with pytest.raises(ProviderError) as info:
        run(text_call(make_client(provider, server)))
    assert info.value.status == 500
    assert server.count == 8  # RetryPolicy.attempts


def test_schema_violation_is_asked_again_with_the_error(
    provider: ProviderName, server: Server
) -> None:
    server.answer({"grade": "superb", "reasons": "x", "count": -1}, dict(GOOD))
    verdict = run(structured_call(make_client(provider, server)))
    assert verdict.grade == "adequate"
    assert server.count == 2
    second = server.requests[1].body["messages"]
    assert second[-2]["role"] == "assistant" and "superb" in second[-2]["content"]
    feedback = second[-1]["content"]
    assert second[-1]["role"] == "user"
    assert "grade" in feedback and "reasons" in feedback and "count" in feedback


def test_second_schema_violation_raises(provider: ProviderName, server: Server) -> None:
    server.script(INVALID, INVALID)
    with pytest.raises(StructuredOutputError, match="Verdict"):
        run(structured_call(make_client(provider, server)))
    assert server.count == 2


def test_flaky_provider_completes_100_calls(provider: ProviderName, server: Server) -> None:
    server.fault_rate = 0.2
    client = make_client(provider, server)

    async def many() -> list[str]:
        try:
            return await asyncio.gather(
                *(client.text([ChatMessage("user", f"q{i}")], stage="t") for i in range(100))
            )
        finally:
            await client.aclose()

    answers = run(many())
    assert answers == [f"echo: q{i}" for i in range(100)]
    assert server.statuses[200] == 100
    assert server.statuses[500] >= 5  # the faults did happen
    assert client.usage.totals()["failures"] == 0


# --- endpoints and keys from the environment -------------------------------------------


def test_anthropic_base_url_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    with AnthropicServer(api_key=KEY) as srv:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        for url in (srv.url, f"{srv.url}/", f"{srv.url}/v1"):  # SDK form and AI-SDK form
            monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
            client = ModelClient("s", ModelConfig(provider="anthropic", model="c"))
            assert run(text_call(client)) == "echo: hello"
        assert srv.count == 3


def test_openai_base_url_and_key_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer(api_key=KEY) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{srv.url}/v1/")
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        client = ModelClient("g", ModelConfig(provider="openai", model="g"))
        assert run(text_call(client)) == "echo: hello"
        assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_config_base_url_and_key_env_win(monkeypatch: pytest.MonkeyPatch) -> None:
    with (
        AnthropicServer(api_key="sk-other-123456") as a,
        OpenAIServer(api_key="sk-other-123456") as o,
    ):
        monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # never used
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        monkeypatch.setenv("MY_KEY", "sk-other-123456")
        for provider, url in (("anthropic", a.url), ("openai", f"{o.url}/v1")):
            cfg = ModelConfig(provider=provider, model="m", base_url=url, api_key_env="MY_KEY")  # type: ignore[arg-type]
            client = ModelClient("x", cfg)
            assert run(text_call(client)) == "echo: hello"
        assert a.count == 1 and o.count == 1


def test_openai_without_key_sends_no_authorization(openai_server: OpenAIServer) -> None:
    client = ModelClient(
        "local", ModelConfig(provider="openai", model="llama", base_url=f"{openai_server.url}/v1")
    )
    assert run(text_call(client)) == "echo: hello"
    assert "authorization" not in openai_server.requests[0].headers


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_missing_key_is_a_clear_error(provider: ProviderName) -> None:
    with AnthropicServer() as a, OpenAIServer() as o:
        url = a.url if provider == "anthropic" else f"{o.url}/v1"
        env = "ANTHROPIC_API_KEY" if provider == "anthropic" else "KORA_TEST_MISSING_KEY"
        cfg = ModelConfig(
            provider=provider,
            model="m",
            base_url=url,
            api_key_env=None if provider == "anthropic" else env,
        )
        client = ModelClient("nokey", cfg)
        with pytest.raises(ProviderError, match=env) as info:
            run(text_call(client))
        assert not info.value.retryable
        assert "nokey" in str(info.value)
        assert a.count == 0 and o.count == 0


def test_openai_token_limit_field() -> None:
    from kora.llm.base import Request
    from kora.llm.providers.openai import OpenAIProvider

    req = Request(messages=(ChatMessage("user", "x"),), max_tokens=77)
    public = OpenAIProvider("g", ModelConfig(provider="openai", model="gpt-4o"))
    assert public.url == "https://api.openai.com/v1/chat/completions"
    assert public._body(req)["max_completion_tokens"] == 77  # what reasoning models accept
    local = OpenAIProvider(
        "l", ModelConfig(provider="openai", model="m", base_url="http://127.0.0.1:1/v1")
    )
    assert local._body(req)["max_tokens"] == 77
    # the table's conditions that pick the field are a model's settings or its tests
    conditions = {c for kind in KINDS.values() for c in kind.token_fields}
    assert all(c in ModelConfig.model_fields or hasattr(ModelConfig, c) for c in conditions)


# --- the call store never keeps an answer that failed validation ----------------------


def test_an_invalid_structured_answer_is_not_replayed_from_the_store(
    provider: ProviderName, server: Server, tmp_path: Any
) -> None:
    """Fixing the server and re-running must call it again, not replay the bad answer."""
    from kora.llm.store.cache import CallCache

    def with_store() -> ModelClient:
        client = make_client(provider, server)
        client.cache = CallCache(tmp_path / "store")
        return client

    bad_enum = {"grade": "superb", "reasons": "a reason long enough", "count": 1}
    server.answer(bad_enum, bad_enum)
    with pytest.raises(StructuredOutputError):
        run(structured_call(with_store()))
    assert server.count == 2
    server.answer(dict(GOOD))
    verdict = run(structured_call(with_store()))
    assert verdict.grade == "adequate"
    assert server.count == 3  # asked again: the bad answer was not stored
    # and the good one is: a third run pays nothing
    assert run(structured_call(with_store())).grade == "adequate"
    assert server.count == 3


def test_a_stored_answer_that_fails_validation_is_ignored(
    provider: ProviderName, server: Server, tmp_path: Any
) -> None:
    """A store written before this rule (or by hand) may hold a bad answer: not served."""
    from kora.llm.base import Response
    from kora.llm.store.cache import CallCache, cache_key

    client = make_client(provider, server)
    client.cache = CallCache(tmp_path / "store")
    request = client.request([ChatMessage("user", "grade it")], schema=Verdict)
    client.cache.put(cache_key(client.identity, request), Response(text='{"grade": "superb"}'))
    verdict = run(structured_call(client))
    assert verdict.grade == "adequate" and server.count == 1
    # the question itself was asked, not the follow-up that quotes the bad answer
    assert len(server.requests[0].body["messages"]) == 1


# --- why a reply ended --------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "answer", "expected"),
    [
        ("anthropic", Ended("A long answer that was cut", "max_tokens"), "max_tokens"),
        ("anthropic", Ended("", "refusal"), "refusal"),
        ("anthropic", Ended("Done.", "end_turn"), "stop"),
        ("anthropic", Ended("Paused", "pause_turn"), "other"),
        ("openai", Ended("A long answer that was cut", "length"), "max_tokens"),
        ("openai", Ended("", "content_filter"), "content_filter"),
        ("openai", Ended("", "stop", refusal="I can't help with that."), "refusal"),
        ("openai", Ended("Done.", "stop"), "stop"),
    ],
)
def test_finish_reason_in_one_vocabulary(
    provider: ProviderName, server: Server, answer: Ended, expected: str
) -> None:
    """A truncated, filtered or refused reply is told apart from one that finished."""
    server.answer(answer)
    client = make_client(provider, server)

    async def one() -> Any:
        try:
            return await client.call(client.request([ChatMessage("user", "hi")]), stage="t")
        finally:
            await client.aclose()

    resp = run(one())
    assert resp.finish_reason == expected
    if answer.refusal:
        assert resp.text == answer.refusal


@pytest.mark.parametrize("nothing", ["", " \n"])
def test_anthropic_target_that_answered_nothing_can_be_asked_again(
    server: Server, provider: ProviderName, nothing: str
) -> None:
    """The next turn after an empty reply, or one of only whitespace (kept as the target
    gave it), is still a valid request."""
    client = make_client(provider, server)
    history = [
        ChatMessage("user", "hi"),
        ChatMessage("assistant", nothing),
        ChatMessage("user", "?"),
    ]

    async def one() -> Any:
        try:
            return await client.call(client.request(history), stage="t")
        finally:
            await client.aclose()

    assert run(one()).text == "echo: ?"


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_service_that_cannot_be_reached_is_named_with_its_url(
    provider: ProviderName, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    from kora.llm.retry import RetryPolicy

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY", KEY)
    config = ModelConfig(provider=provider, model="m", base_url=url)
    client = ModelClient("far", config, retry_policy=RetryPolicy())
    with pytest.raises(ProviderError) as info:
        run(text_call(client))
    assert info.value.unreachable
    assert "'far'" in str(info.value) and "127.0.0.1" in str(info.value)
    assert "cannot connect" in str(info.value)


@pytest.mark.parametrize("status", [400, 500])
def test_error_bodies_reach_the_terminal_without_control_characters(
    provider: ProviderName, server: Server, status: int
) -> None:
    """A hostile or broken server must not be able to drive the user's terminal."""
    hostile = "boom \x1b[2J\x1b]0;owned\x07 \u202eevil\r\nnext"
    server.script(*[Fault.http(status, message=hostile)] * 10)
    with pytest.raises(ProviderError) as info:
        run(text_call(make_client(provider, server)))
    message = str(info.value)
    assert "boom" in message
    assert not any(c in message for c in "\x1b\x07\r\u202e")
    # the server's lines stay lines (not \u000a), each indented under the model's own: a
    # server cannot write a line of its own at the start of the terminal's line
    assert "\\u000a" not in message and "next" in message
    assert all(line.startswith("  ") for line in message.splitlines()[1:]), message


def test_calls_go_through_the_proxy_the_environment_names(
    provider: ProviderName, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind a company proxy (HTTP(S)_PROXY), every call goes to the proxy, as curl and
    the SDKs do: the model's host here does not even resolve (.invalid), so a call that
    ignored the proxy could not be made. The loopback server plays the proxy."""
    for var in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url)
    far = "http://kora-model-host.invalid"
    client = make_client(provider, server, base_url=far if provider == "anthropic" else f"{far}/v1")
    assert run(text_call(client, "through the proxy")) == "echo: through the proxy"
    (rec,) = server.requests
    assert rec.headers["host"] == "kora-model-host.invalid"


def _dead_proxy(monkeypatch: pytest.MonkeyPatch) -> str:
    """HTTP_PROXY the only proxy variable, naming a port nothing listens on; its URL."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    for var in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.setenv("HTTP_PROXY", dead)
    return dead


def test_a_proxy_that_takes_no_connection_is_named_not_the_model(
    provider: ProviderName, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy variable that names a port nothing listens on: the error names the proxy and
    the variables to check, not the model's host, which was never tried."""
    dead = _dead_proxy(monkeypatch)
    far = "http://kora-model-host.invalid"
    client = make_client(provider, server, base_url=far if provider == "anthropic" else f"{far}/v1")
    with pytest.raises(ProviderError) as caught:
        run(text_call(client, "through the proxy"))
    message = str(caught.value)
    assert f"cannot connect to {dead}" in message and "refused the connection" in message
    assert "HTTP_PROXY" in message and "kora-model-host.invalid:80" not in message


def test_hosts_in_no_proxy_are_called_directly(
    provider: ProviderName, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NO_PROXY names the hosts reached without the proxy (a local model server, say):
    the proxy here is a port nothing listens on, so only a direct call can succeed."""
    _dead_proxy(monkeypatch)
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert run(text_call(make_client(provider, server), "direct")) == "echo: direct"
