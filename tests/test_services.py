"""Chat services as targets from config alone: the services of config/examples/, `kora ping`,
sessions, blocked apps and secrets, against loopback services of each shape."""

from __future__ import annotations

import asyncio
import random
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from kora.benchmarks.taxonomy import load_taxonomy
from kora.commands.main import main as kora_main
from kora.config.checks import validate_config
from kora.errors import ConfigError
from kora.llm.base import BlockedError, ChatMessage
from kora.llm.providers.service import ServiceTarget, find
from kora.llm.settings.config import ModelConfig
from tests.loopback import AnthropicServer, ChatEndpointServer, LoopbackServer, OpenAIServer
from tests.services import AppRunnerServer, SessionChatServer, StatelessChatServer
from tests.workflows import structured_answer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "config" / "examples"


def example(name: str, url: str) -> dict[str, Any]:
    """An example config with its service moved to `url`."""
    cfg: dict[str, Any] = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    for m in cfg["models"].values():
        if "base_url" in m:
            m["base_url"] = url + ("/v1" if m["base_url"].rstrip("/").endswith("/v1") else "")
    return cfg


def ping(
    tmp_path: Path, cfg: dict[str, Any], *args: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    overlay = tmp_path / "overlay.yaml"
    # the checkout's config and taxonomy, but a bill and store of the test's own
    overlay.write_text(yaml.safe_dump({"cache_dir": str(tmp_path / "cache"), **cfg}))
    target = next(iter(cfg["targets"]))
    rc = kora_main(["ping", target, "--configfile", str(overlay), *args])
    out = capsys.readouterr()
    return rc, out.out + out.err


@pytest.fixture(autouse=True)
def _in_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # config.yaml and the taxonomy, as a user runs kora


SERVERS: dict[str, tuple[type[LoopbackServer], dict[str, str], str]] = {
    # example: (server, environment, a piece of the reply the target must show)
    "ollama": (OpenAIServer, {}, "ok"),
    "vllm": (OpenAIServer, {}, "ok"),
    "lmstudio": (OpenAIServer, {}, "ok"),
    "llamacpp": (OpenAIServer, {}, "ok"),
    "openrouter": (OpenAIServer, {"OPENROUTER_API_KEY": "or-key"}, "ok"),
    "stateless-json": (StatelessChatServer, {"ACME_CHAT_TOKEN": "stateless-secret"}, "turn 1"),
    "session-api": (SessionChatServer, {"BUDDY_API_KEY": "session-secret"}, "s1 turn 1"),
    "app-runner": (AppRunnerServer, {"RUNNER_TOKEN": "runner-secret"}, "some-app reply 1"),
    "mydd": (ChatEndpointServer, {}, "I hear you say"),
}


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_each_readme_example_reaches_a_service_of_its_shape(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kind, env, expected = SERVERS[name]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    kw = {"token": "runner-secret"} if kind is AppRunnerServer else {}
    with kind(**kw) as srv:
        if kind is OpenAIServer:
            srv.answer("ok, octopuses have three hearts")  # type: ignore[attr-defined]
        rc, out = ping(tmp_path, example(name, srv.url), "--target-only", capsys=capsys)
    assert rc == 0, out
    assert "target" in out and ": ok in" in out and expected in out
    for secret in env.values():
        assert secret not in out  # shown masked, never in clear


def test_ping_shows_the_requests_with_secrets_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BUDDY_API_KEY", "session-secret")
    with SessionChatServer() as srv:
        rc, out = ping(tmp_path, example("session-api", srv.url), "--target-only", capsys=capsys)
        assert not srv.problems
        assert all(s.closed for s in srv.sessions.values())  # ping closes what it opens
    assert rc == 0, out
    assert f"POST {srv.url}/api/sessions -> 201" in out
    assert f"POST {srv.url}/api/sessions/s1/messages -> 200" in out
    assert f"DELETE {srv.url}/api/sessions/s1 -> 200" in out
    assert "X-Api-Key: ****" in out and "session-secret" not in out
    assert '"text":"hi! can you tell me one fun fact about octopuses?"' in out
    # the service's answer is in the workspace's bill, as every ping's call is
    from kora.llm.money.bill import bill_dir, charges

    (billed,) = [c for c in charges(bill_dir(tmp_path / "cache")) if c.model == "buddy"]
    assert billed.counts.calls == 1 and billed.stage == "target"


def test_ping_says_at_once_when_nothing_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACME_CHAT_TOKEN", "x")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    rc, out = ping(tmp_path, example("stateless-json", dead), "--target-only", capsys=capsys)
    assert rc == 1
    assert "FAILED" in out and "cannot connect" in out and dead in out


@pytest.mark.timeout(60)
def test_ping_makes_each_roles_real_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The seed, expansion and judge models get a structured call with their role's
    schema, the child model the first child message: each line says what was accepted."""
    monkeypatch.setenv("ACME_CHAT_TOKEN", "stateless-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-loop")
    with StatelessChatServer() as chat, AnthropicServer(structured=structured_answer) as llm:
        cfg = example("stateless-json", chat.url)
        cfg["models"]["claude"] = {
            "provider": "anthropic",
            "model": "claude-sonnet-5-5",
            "base_url": llm.url,
        }
        cfg.update(user_model="claude", judges=["claude"], seed_model="claude")
        cfg["expand_model"] = "claude"
        rc, out = ping(tmp_path, cfg, capsys=capsys)
        tools = [r.body["tools"][0]["name"] for r in llm.requests if r.body.get("tools")]
    assert rc == 0, out
    assert tools == ["ModelScenarioSeeds", "ModelScenarioLight", "TestAssessment"], tools
    lines = {line.split(":", 1)[0]: line for line in out.splitlines() if ": ok in" in line}
    assert set(lines) == {"target acme-chat", "seed claude", "expansion claude",
                          "child claude", "judge claude"}  # fmt: skip
    for role in ("seed", "expansion", "judge"):
        assert "sent as a forced tool call: accepted; the answer fits" in lines[f"{role} claude"]
    assert "text call: " in lines["child claude"]
    # the child's real prompt: the first message of the example scenario's child
    child = next(r for r in llm.requests if not r.body.get("tools"))
    assert "Bike ramp" in str(child.body) or "ramp" in str(child.body)


def test_a_missing_secret_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ACME_CHAT_TOKEN", raising=False)
    with StatelessChatServer() as srv:
        rc, out = ping(tmp_path, example("stateless-json", srv.url), "--target-only", capsys=capsys)
        assert srv.count == 0
    assert rc == 1 and "not sent: set ACME_CHAT_TOKEN" in out


def _validate(models: dict[str, Any]) -> None:
    raw = {
        "models": {"m": {"provider": "mock"}, **models},
        "seed_model": "m",
        "expand_model": "m",
        "user_model": "m",
        "judges": ["m"],
        "targets": {"t": {"model": next(iter(models))}},
    }
    validate_config(raw, load_taxonomy(ROOT / "data" / "taxonomy"))


@pytest.mark.parametrize(
    ("http", "message"),
    [
        ({"turn": {"url": "/x", "body": {"t": "{{ mesage }}"}}}, "unknown variable 'mesage'"),
        ({"turn": {"url": "/x", "body": "{{ message "}}, "template error"),
        ({"turn": {"url": "/x", "method": "FETCH"}}, "method"),
        ({"turn": {"url": "/x", "replyy": "a"}}, "replyy"),
        ({"open": {"url": "/o"}}, "turn"),
    ],
)
def test_config_errors_name_the_field(http: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        _validate({"svc": {"provider": "http", "base_url": "http://h", "http": http}})
    assert "models.svc" in str(info.value)


# a template that is one `{{ expression }}` sends the expression's value as it is: one that
# gives a function, an iterator or anything else that JSON has no form for is a mistake
# in the config, named with its model and key
NOT_JSON = [
    ({"t": "{{ messages.append }}"}, "body.t", "a function (append)"),
    ("{{ range }}", "body", "a function"),
    ({"roles": "{{ messages | map(attribute='role') }}"}, "body.roles", "| list"),
    ({"a": ["{{ cycler }}"]}, "body.a[0]", "a function"),
    ({"n": "{{ 10 ** 30 }}"}, "body.n", "too large"),
    ({"s": "{{ '\\ud800' }}"}, "body.s", "lone surrogate"),
    ({"m": "{{ {1: message} }}"}, "body.m", "key that is not text"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("body", "where", "what"), NOT_JSON)
def test_a_template_that_gives_no_json_value_is_a_config_error_naming_it(
    body: Any, where: str, what: str
) -> None:
    http = {"turn": {"url": "/x", "body": body}}
    with pytest.raises(ConfigError) as info:
        _validate({"svc": {"provider": "http", "base_url": "http://h", "http": http}})
    message = str(info.value)
    assert f"models.svc.http.turn.{where}: " in message and what in message
    assert "not JSON" in message or "not a value" in message


@pytest.mark.timeout(30)
def test_a_url_template_must_give_text() -> None:
    http = {"turn": {"url": "{{ range }}"}}
    with pytest.raises(ConfigError, match=r"models\.svc\.http\.turn\.url: .*a function"):
        _validate({"svc": {"provider": "http", "base_url": "http://h", "http": http}})
    # what is fine stays fine: a number in a URL, a list made of an iterator, a body key
    # that happens to be called `url`
    from kora.llm.settings.service_config import TEMPLATE_VARIABLES, sample_variables

    assert set(sample_variables()) == set(TEMPLATE_VARIABLES)  # every variable is tried
    fine = {"turn": {"url": "/x/{{ turn }}/{{ session_id }}", "body": {
        "n": "{{ turn }}", "roles": "{{ messages | map(attribute='role') | list }}",
        "url": "{{ messages }}", "later": "{{ messages[3].content }}"}}}  # fmt: skip
    _validate({"svc": {"provider": "http", "base_url": "http://h", "http": fine}})
    _validate({"svc": {"provider": "http", "base_url": "http://h",
                       "http": {"turn": {"url": "{{ turn }}"}}}})  # fmt: skip


@pytest.mark.timeout(60)
def test_check_config_names_the_template_that_gives_a_function(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = example("stateless-json", "http://127.0.0.1:9")
    cfg["models"]["acme-chat"]["http"]["turn"]["body"]["messages"] = "{{ messages.append }}"
    overlay = tmp_path / "overlay.yaml"
    # the checkout's config and taxonomy, but a bill and store of the test's own
    overlay.write_text(yaml.safe_dump({"cache_dir": str(tmp_path / "cache"), **cfg}))
    rc = kora_main(["check-config", "--configfile", str(overlay)])
    err = capsys.readouterr().err
    assert rc != 0
    assert "models.acme-chat.http.turn.body.messages: " in err and "a function (append)" in err
    assert "Traceback" not in err


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("body", "where", "what"), NOT_JSON)
def test_a_template_that_gives_no_json_value_fails_its_test_naming_it(
    body: Any, where: str, what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built without the config's checks (a model made in code): the first request says
    what is wrong, and nothing is sent."""
    from kora.llm.base import ProviderError

    monkeypatch.setenv("ACME_CHAT_TOKEN", "stateless-secret")
    with StatelessChatServer() as srv:
        cfg = example("stateless-json", srv.url)
        cfg["models"]["acme-chat"]["http"]["turn"]["body"] = body
        t = _service(cfg, "acme-chat")

        async def go() -> None:
            try:
                session = await t.open_session("7to9", None, "sys")
                await session.reply([ChatMessage("user", "hi")])
            finally:
                await t.aclose()

        with pytest.raises(ProviderError) as info:
            asyncio.run(go())
        assert srv.count == 0
    message = str(info.value)
    assert "model 'acme-chat'" in message and f"http.turn.{where}: " in message
    assert what in message and not info.value.retryable


def test_relative_urls_need_a_base_url_and_services_are_targets_only() -> None:
    with pytest.raises(ConfigError, match="set `base_url`"):
        _validate({"svc": {"provider": "http", "http": {"turn": {"url": "/x"}}}})
    with pytest.raises(ConfigError, match="needs `app`"):
        _validate({"svc": {"provider": "app-runner", "base_url": "http://h"}})
    with pytest.raises(ConfigError, match="only be a target"):
        raw = {
            "models": {"svc": {"provider": "app-runner", "base_url": "http://h", "app": "a"}},
            "seed_model": "svc",
            "expand_model": "svc",
            "user_model": "svc",
            "judges": ["svc"],
        }
        validate_config(raw, load_taxonomy(ROOT / "data" / "taxonomy"))


def test_find_walks_keys_and_indices() -> None:
    data = {"choices": [{"message": {"content": "hi"}}], "n": 0}
    assert find(data, "choices.0.message.content") == "hi"
    assert find(data, "choices.-1.message.content") == "hi"
    assert find(data, "choices.3.message") is None and find(data, "n.x") is None


def _service(cfg: dict[str, Any], name: str) -> ServiceTarget:
    return ServiceTarget(name, ModelConfig.model_validate(cfg["models"][name]))


def test_concurrent_tests_never_share_a_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """30 tests at once, turns interleaved: each has its own session, which holds its own
    messages in order, its memory once, and is closed at the end."""
    monkeypatch.setenv("BUDDY_API_KEY", "session-secret")
    rng = random.Random(3)

    async def one(t: ServiceTarget, i: int) -> tuple[str, list[str]]:
        session = await t.open_session(
            "13to17", f"memory {i}" if i % 2 else None, "sys", test_key=f"test-{i}"
        )
        messages: list[ChatMessage] = []
        replies = []
        for k in range(3):
            await asyncio.sleep(rng.uniform(0, 0.01))
            messages.append(ChatMessage("user", f"test {i} message {k}"))
            r = await session.reply(messages)
            replies.append(r.text)
            messages.append(ChatMessage("assistant", r.text))
        await session.close("completed")
        return session.session_id, replies

    with SessionChatServer(latency=0.01) as srv:
        t = _service(example("session-api", srv.url), "buddy")

        async def go() -> list[tuple[str, list[str]]]:
            try:
                return await asyncio.gather(*(one(t, i) for i in range(30)))
            finally:
                await t.aclose()

        results = asyncio.run(go())
        sessions = dict(srv.sessions)
        assert not srv.problems
    assert len({sid for sid, _ in results}) == 30
    for i, (sid, replies) in enumerate(results):
        s = sessions[sid]
        assert s.ref == f"test-{i}" and s.age == 15 and s.closed
        assert s.texts == [f"test {i} message {k}" for k in range(3)]
        assert s.memory == ([f"memory {i}"] if i % 2 else [])
        assert replies == [f"{sid} turn {k + 1}: test {i} message {k}" for k in range(3)]


def test_a_blocked_app_is_a_reason_not_a_retry() -> None:
    with AppRunnerServer(
        block_open={"t-open": "captcha"}, block_turn={"t-turn": "rate_limit"}
    ) as srv:
        t = _service(example("app-runner", srv.url), "some-app")
        t.config = t.config.model_copy(update={"api_key_env": None})

        async def go() -> list[BaseException | None]:
            out: list[BaseException | None] = []
            try:
                for key in ("t-open", "t-turn", "t-fine"):
                    try:
                        s = await t.open_session(None, None, "", test_key=key)
                        for k in range(3):
                            await s.reply([ChatMessage("user", f"m{k}")])
                        await s.close("completed")
                        out.append(None)
                    except BlockedError as exc:
                        out.append(exc)
                        if key == "t-turn":
                            await s.close("errored")
            finally:
                await t.aclose()
            return out

        errors = asyncio.run(go())
        closed = dict(srv.closed)
        count = srv.count
    assert [getattr(e, "reason", None) for e in errors] == ["captcha", "rate_limit", None]
    assert "captcha" in str(errors[0]) and "some-app" in str(errors[0])
    # open (blocked) 1; open + 2 turns + close 4; open + 3 turns + close 5: nothing retried
    assert count == 10
    assert sorted(closed.values()) == ["completed", "errored"]


def test_an_llm_reply_keeps_its_time_also_when_read_from_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kora.llm.client import ModelClient
    from kora.llm.providers.factories import Shared
    from kora.llm.store.cache import CallCache

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-loop")
    with AnthropicServer(latency=0.05) as srv:
        cfg = ModelConfig(provider="anthropic", model="claude-sonnet-5-5", base_url=srv.url)

        async def twice() -> list[Any]:
            client = ModelClient("t", cfg, Shared(store=CallCache(tmp_path)))
            try:
                req = client.request([ChatMessage("user", "hi")], system="s")
                return [await client.call(req, stage="target") for _ in range(2)]
            finally:
                await client.aclose()

        first, second = asyncio.run(twice())
        assert srv.count == 1
    assert first.meta["latency"] >= 0.05
    assert second.meta["cached"] and second.meta["latency"] == round(first.meta["latency"], 3)


def test_the_mydd_example_is_the_chat_endpoint_contract_written_out() -> None:
    from kora.llm.settings.service_config import CHAT_ENDPOINT, HttpSpec

    cfg = yaml.safe_load((EXAMPLES / "mydd.yaml").read_text())
    assert HttpSpec.model_validate(cfg["models"]["mydd-http"]["http"]) == CHAT_ENDPOINT


def test_a_service_is_called_through_the_proxy_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Behind a company proxy (HTTP_PROXY), a chat service's requests go to the proxy, as
    the providers' do: the service's host does not even resolve (.invalid), so only a
    request through the proxy can be answered. The loopback service plays the proxy."""
    for var in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ACME_CHAT_TOKEN", "stateless-secret")
    with StatelessChatServer() as srv:
        monkeypatch.setenv("HTTP_PROXY", srv.url)
        t = _service(example("stateless-json", "http://kora-chat-host.invalid"), "acme-chat")

        async def go() -> str:
            try:
                session = await t.open_session("7to9", None, "")
                return (await session.reply([ChatMessage("user", "hello")])).text
            finally:
                await t.aclose()

        assert asyncio.run(go()) == "turn 1 of 1 messages (age 8): hello"


@pytest.mark.parametrize(
    ("charset", "sent", "read"),
    [
        ("iso-8859-1", "Grüße".encode("latin-1"), "Grüße"),  # the charset it names
        ("x-klingon", "Grüße".encode(), "Grüße"),  # one Python does not know: UTF-8
        (None, "Grüße".encode(), "Grüße"),  # none named: UTF-8
    ],
)
def test_a_whole_body_reply_is_read_in_the_charset_its_answer_names(
    charset: str | None, sent: bytes, read: str
) -> None:
    from tests.misbehaving import Misbehaving, body

    content_type = "text/plain" + (f"; charset={charset}" if charset else "")
    with Misbehaving() as srv:
        srv.every(body(sent, content_type=content_type))
        turn = {"url": "/chat", "body": {"q": "{{ message }}"}, "reply": None}
        config = {"provider": "http", "base_url": srv.url, "http": {"turn": turn}}
        t = ServiceTarget("svc", ModelConfig.model_validate(config))

        async def go() -> str:
            try:
                session = await t.open_session(None)
                return (await session.reply([ChatMessage("user", "hi")])).text
            finally:
                await t.aclose()

        assert asyncio.run(go()) == read


@pytest.mark.parametrize("name", ["stateless-json", "app-runner"])
def test_a_refused_credential_names_the_variable_it_came_from(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 401 names the variable to check, as a provider's does: a `${NAME}` in a header
    (stateless-json) or the model's `api_key_env` (app-runner)."""
    kind, env, _ = SERVERS[name]
    ((var, secret),) = env.items()
    monkeypatch.setenv(var, "not-the-token")
    with kind(**({"token": secret} if kind is AppRunnerServer else {})) as srv:
        rc, out = ping(tmp_path, example(name, srv.url), "--target-only", capsys=capsys)
    assert rc == 1 and "HTTP 401" in out and f"(check {var})" in out, out
    assert "not-the-token" not in out
