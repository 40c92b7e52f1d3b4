"""Issue 25, items 4 and 5: secrets in every form out of what a run writes or prints,
and no terminal control from a server reaching the terminal.

Masking finds a key raw, JSON-escaped, percent-encoded and inside base64 (a basic-auth
pair), before any cutting; an empty key masks nothing. A target that echoes its own
token in a normal reply is written with `****` and the turn marked `masked`. A URL with
credentials is refused by the config check, with how to pass them as a header."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from kora.benchmarks.outcomes import TargetTurn
from kora.commands.main import main as kora_main
from kora.config.checks import validate_config
from kora.errors import ConfigError
from kora.llm.base import ChatMessage, ProviderError
from kora.llm.client import ModelClient
from kora.llm.masking import Masker, redact, terminal_safe
from kora.llm.providers.factories import Shared
from kora.llm.providers.service import ServiceTarget
from kora.llm.settings.config import ModelConfig
from tests.loopback import Fault, OpenAIServer
from tests.misbehaving import Misbehaving, body, echo_token, token_forms

KEY = "sk-live/0123+4567=abcd"
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "form",
    [
        KEY,
        json.dumps(KEY).replace("/", "\\/"),  # PHP and others escape the slash
        "".join(f"\\u{ord(c):04x}" for c in KEY),  # every character escaped
        "".join(f"\\u{ord(c):04X}" if i % 2 else c for i, c in enumerate(KEY)),  # some
        urllib.parse.quote(KEY, safe=""),
        urllib.parse.quote(KEY, safe="").replace("%2F", "%2f"),
        "Basic " + base64.b64encode(f"someone:{KEY}".encode()).decode(),
        base64.urlsafe_b64encode(KEY.encode()).decode().rstrip("="),
    ],
)
def test_every_form_of_a_secret_is_masked(form: str) -> None:
    text = f'{{"error": "bad key {form} given"}}'
    out, masked = Masker([KEY]).masked(text)
    assert masked and "****" in out
    assert "0123" not in out and "4567" not in out and "abcd" not in out
    assert redact(text, KEY).count("****") == 1


@pytest.mark.timeout(10)
def test_an_empty_or_tiny_secret_masks_nothing() -> None:
    text = "a normal reply"
    assert Masker(["", None, "a"]).masked(text) == (text, False)
    assert redact(text, "") == text


@pytest.mark.timeout(30)
def test_a_key_on_the_cut_of_an_error_does_not_survive_in_part(
    monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    # the key straddles character 200 of the error body (where messages are cut)
    openai_server.script(Fault.http(400, message="x" * 180 + f" key {KEY} rejected"))
    config = ModelConfig(provider="openai", model="m", base_url=f"{openai_server.url}/v1",
                         api_key_env="OPENAI_API_KEY")  # fmt: skip
    client = ModelClient("m", config)
    with pytest.raises(ProviderError) as info:
        asyncio.run(client.text([ChatMessage("user", "hi")], stage="t"))
    assert "sk-live" not in str(info.value) and "****" in str(info.value)


@pytest.mark.timeout(30)
def test_an_empty_header_variable_masks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMPTY_TOKEN", "")
    config = ModelConfig.model_validate(
        {"provider": "http", "base_url": "http://x",
         "http": {"headers": {"X-Token": "${EMPTY_TOKEN}"},
                  "turn": {"url": "/chat", "body": {"q": "{{ message }}"}, "reply": "reply"}}}
    )  # fmt: skip
    with Misbehaving() as srv:
        srv.next(body(b"service unavailable", status=400))
        srv.every(body(b'{"reply": "hello there"}'))
        target = ServiceTarget("svc", config.model_copy(update={"base_url": srv.url}))
        with pytest.raises(ProviderError) as info:
            asyncio.run(_one_turn(target))
        target = ServiceTarget("svc", config.model_copy(update={"base_url": srv.url}))
        reply = asyncio.run(_one_turn(target))
    assert "HTTP 400" in str(info.value) and "service unavailable" in str(info.value)
    assert reply.text == "hello there" and not reply.meta.get("masked")


async def _one_turn(target: ServiceTarget) -> Any:
    try:
        session = await target.open_session("10to12")
        return await session.reply([ChatMessage("user", "hi")])
    finally:
        await target.aclose()


def _echoing(url: str) -> ModelConfig:
    return ModelConfig.model_validate(
        {"provider": "http", "base_url": url,
         "http": {"headers": {"Authorization": "Bearer ${ECHO_TOKEN}"},
                  "turn": {"url": "/chat", "body": {"q": "{{ message }}"}, "reply": "reply"}}}
    )  # fmt: skip


@pytest.mark.timeout(30)
def test_a_target_that_echoes_its_token_is_recorded_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ECHO_TOKEN", KEY)
    with Misbehaving() as srv:
        srv.every(echo_token())
        target = ServiceTarget("svc", _echoing(srv.url))
        reply = asyncio.run(_one_turn(target))
    assert reply.meta.get("masked") is True
    assert reply.text.startswith("you sent ****")
    for form in token_forms(KEY):
        assert form not in reply.text
    assert "0123" not in reply.text and "abcd" not in reply.text
    # the record says so (and an unmasked turn's record is as it was)
    assert TargetTurn(masked=True).model_dump(exclude_none=True)["masked"] is True
    assert "masked" not in TargetTurn().model_dump(exclude_none=True)


@pytest.mark.timeout(30)
def test_an_llm_target_that_echoes_its_key_is_masked_before_it_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> None:
    from kora.llm.store.cache import CallCache

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    openai_server.answer(f"my key is {KEY}, and {urllib.parse.quote(KEY, safe='')}")
    config = ModelConfig(provider="openai", model="m", base_url=f"{openai_server.url}/v1",
                         api_key_env="OPENAI_API_KEY")  # fmt: skip
    client = ModelClient("m", config, Shared(store=CallCache(tmp_path)))
    resp = asyncio.run(client.call(client.request([ChatMessage("user", "hi")]), stage="t"))
    assert resp.text == "my key is ****, and ****" and resp.meta["masked"] is True
    stored = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert stored and all(b"0123" not in f.read_bytes() for f in stored)


def _ping(tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    overlay = tmp_path / "echo.yaml"
    model = _echoing(url).model_dump(exclude_none=True, exclude_defaults=True)
    overlay.write_text(
        yaml.safe_dump(
            {"cache_dir": str(tmp_path / "cache"),  # a bill of the test's own
             "models": {"echo": {"provider": "http", **model}},
             "targets": {"echo-target": {"model": "echo", "prompts": ["child"]}}}
        )
    )  # fmt: skip
    rc = kora_main(["ping", "echo-target", "--configfile", str(overlay), "--target-only"])
    out = capsys.readouterr()
    return rc, out.out + out.err


@pytest.mark.timeout(60)
def test_kora_ping_shows_no_form_of_an_echoed_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("ECHO_TOKEN", KEY)
    with Misbehaving() as srv:
        srv.every(echo_token())
        rc, out = _ping(tmp_path, srv.url, capsys)
    assert rc == 0, out
    assert "you sent ****" in out
    for form in token_forms(KEY):
        assert form not in out


ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\rover\u202eevil\x9b1m"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("status", [200, 500])
def test_kora_ping_prints_no_terminal_control_from_a_server(
    status: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("ECHO_TOKEN", "token-1234")
    with Misbehaving() as srv:
        srv.every(body(json.dumps({"reply": f"hi {ESCAPES} there"}).encode(), status=status))
        rc, out = _ping(tmp_path, srv.url, capsys)
    assert rc == (0 if status == 200 else 1), out
    assert "red" in out and "there" in out  # the text stays, its control goes
    for c in ("\x1b", "\x07", "\r", "\u202e", "\x9b"):
        assert c not in out, repr(out)


@pytest.mark.timeout(10)
def test_terminal_safe_keeps_text_and_drops_control() -> None:
    assert terminal_safe("a\tb\nc") == "a\tb\nc"
    assert terminal_safe(f"x{ESCAPES}y") == "xredoverevily"


def _config(base_url: str, provider: str = "http") -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load((ROOT / "config.yaml").read_text())
    model: dict[str, Any] = {"provider": provider, "base_url": base_url}
    if provider == "http":
        model["http"] = {"turn": {"url": "/chat", "body": {"q": "{{ message }}"}}}
    else:
        model["model"] = "m"
    raw["models"]["svc"] = model
    raw["targets"] = {"svc-target": {"model": "svc"}}
    return raw


@pytest.mark.timeout(30)
@pytest.mark.parametrize("provider", ["http", "openai", "chat-endpoint"])
def test_credentials_in_a_url_are_refused_with_how_to_pass_a_header(provider: str) -> None:
    from kora.benchmarks.taxonomy import load_taxonomy

    taxonomy = load_taxonomy(ROOT / "data" / "taxonomy")
    url = "https://kora:hunter2-pw@chat.example/v1"
    with pytest.raises(ConfigError) as info:
        validate_config(_config(url, provider), taxonomy)
    msg = str(info.value)
    assert "hunter2" not in msg and "models.svc.base_url" in msg
    assert "credentials in the URL (https://****@chat.example/v1)" in msg
    assert ("${" in msg and "headers" in msg) if provider == "http" else "api_key_env" in msg


@pytest.mark.timeout(10)
def test_a_url_from_the_environment_is_never_shown_with_its_credentials() -> None:
    from types import SimpleNamespace

    from kora.llm.wire.http import unreachable

    by = SimpleNamespace(label="m", timeout=1.0, _key=None, source="X_URL")
    msg = str(unreachable(by, "https://kora:hunter2-pw@llm.example/v1", OSError(111, "x")))
    assert "hunter2" not in msg and "https://****@llm.example/v1" in msg


@pytest.mark.timeout(10)
def test_a_jobs_message_reaches_the_terminal_without_control(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from kora.run.broker import dispatch, execute
    from kora.run.transport.reply import Outcome

    said = Outcome(1, f"kora: job stopped: {ESCAPES}")
    monkeypatch.setattr(dispatch, "hand_over", lambda spec: None)
    monkeypatch.setattr(execute, "run_here", lambda spec: said)
    smk = SimpleNamespace(input={}, output={}, params={}, log=[], config={})
    with pytest.raises(SystemExit):
        dispatch.run("seeds", smk)
    err = capsys.readouterr().err
    assert "job stopped: redoverevil" in err and "\x1b" not in err
