"""Before a run's first job: a provider this machine cannot reach (a host that does not
resolve, a port that refuses) stops the run in a few lines naming the model, the host and
what to check, the public APIs included; a host that is merely slow is left to the
run's retries. No test here reaches the network: names resolve through tests/offline's
resolver or are `.invalid`, and ports are loopback ones nothing listens on."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kora.benchmarks.taxonomy import load_taxonomy
from kora.config.checks import validate_config
from kora.config.schema import KoraConfig
from kora.llm.base import ChatMessage, ProviderError
from kora.llm.client import ModelClient
from kora.llm.registry import KINDS
from kora.run import preflight
from kora.run.preflight import check_models
from tests.helpers import REPO, copy_workflow
from tests.loopback import AnthropicServer, OpenAIServer
from tests.workflows import command

pytestmark = pytest.mark.timeout(60)

_resolve = socket.getaddrinfo
TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy")


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """No host name but loopback resolves (as tests/offline does for subprocesses); the
    names asked are listed."""
    asked: list[str] = []

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(str(host))
        if host not in ("127.0.0.1", "localhost"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return _resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    monkeypatch.setenv("OPENAI_API_KEY", "y")
    yield asked


def dead_port() -> int:
    with socket.socket() as s:  # a port nothing listens on once it is closed
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cfg(**models: dict[str, Any]) -> KoraConfig:
    names = list(models)
    raw = {
        "models": models,
        "seed_model": names[0],
        "expand_model": names[0],
        "user_model": names[0],
        "judges": [names[0]],
        "targets": {"t": {"model": names[-1]}},
    }
    return validate_config(raw, TAXONOMY)


def test_a_key_is_asked_before_a_run_exactly_where_a_call_needs_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One rule says whether a model needs an API key: the check before a run names a
    missing key for exactly the models whose calls stop for it before sending anything
    (OpenAI's own API needs one; a server of one's own speaking its protocol may not)."""
    with OpenAIServer() as public, OpenAIServer() as local, AnthropicServer() as claude:
        # OpenAI's public API, played on loopback under another host name than the local
        own = replace(KINDS["openai"], default_url=f"http://localhost:{public.port}/v1")
        monkeypatch.setitem(KINDS, "openai", own)
        for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "KORA_NO_KEY"):
            monkeypatch.delenv(var, raising=False)
        config = cfg(
            own={"provider": "openai", "model": "g"},
            local={"provider": "openai", "model": "g", "base_url": f"{local.url}/v1"},
            named={"provider": "openai", "model": "g", "base_url": f"{local.url}/v1",
                   "api_key_env": "KORA_NO_KEY"},
            claude={"provider": "anthropic", "model": "c", "base_url": claude.url},
        )  # fmt: skip
        for name, model in config.models.items():
            client = ModelClient(name, model)
            try:
                asyncio.run(client.text([ChatMessage("user", "hi")], stage="t"))
                stopped = False
            except ProviderError as exc:
                stopped = "is not set" in str(exc)
            assert stopped == bool(preflight.missing_keys(config, [name])), name
        assert public.count == 0 and claude.count == 0 and local.count == 1


def test_the_public_apis_are_checked_too(offline: list[str]) -> None:
    """The shipped config names no base_url: its models go to the providers' public
    APIs, which must be checked like any other address."""
    config = cfg(
        sonnet={"provider": "anthropic", "model": "claude-x"},
        gpt={"provider": "openai", "model": "gpt-x"},
    )
    errors, warnings = check_models(config, {"sonnet", "gpt"})
    assert not warnings
    assert {"api.anthropic.com", "api.openai.com"} <= set(offline)
    text = "\n".join(errors)
    assert len(errors) == 2, text
    for model, host in (("gpt", "api.openai.com"), ("sonnet", "api.anthropic.com")):
        line = next(e for e in errors if f"model {model!r}" in e)
        assert host in line and "does not resolve" in line
        assert "internet" in line and "DNS" in line and "HTTPS_PROXY" in line  # what to check


def test_a_host_that_does_not_resolve_is_named(offline: list[str]) -> None:
    config = cfg(m={"provider": "openai", "model": "x", "base_url": "http://llm.invalid:8000/v1"})
    errors, _ = check_models(config, {"m"})
    assert len(errors) == 1
    assert "model 'm'" in errors[0] and "llm.invalid" in errors[0]
    assert "does not resolve" in errors[0] and "base_url" in errors[0]


def test_a_refused_connection_is_named(offline: list[str]) -> None:
    url = f"http://127.0.0.1:{dead_port()}/v1"
    config = cfg(m={"provider": "openai", "model": "x", "base_url": url})
    errors, _ = check_models(config, {"m"})
    assert len(errors) == 1 and url in errors[0] and "Connection refused" in errors[0]
    assert "is the service running" in errors[0]


def test_a_base_url_from_the_environment_is_named_with_its_variable(
    offline: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gateway.invalid/v1")
    config = cfg(m={"provider": "openai", "model": "x"})
    errors, _ = check_models(config, {"m"})
    assert len(errors) == 1 and "gateway.invalid" in errors[0] and "OPENAI_BASE_URL" in errors[0]


def test_a_host_probed_once_for_all_its_models(offline: list[str]) -> None:
    config = cfg(
        a={"provider": "anthropic", "model": "claude-a"},
        b={"provider": "anthropic", "model": "claude-b"},
    )
    errors, _ = check_models(config, {"a", "b"})
    assert len(errors) == 2 and offline.count("api.anthropic.com") == 1


def test_a_slow_host_is_left_to_the_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection that does not complete in time may be a passing fault: the run starts
    (its calls retry) and a warning says what was seen."""

    def slow(*args: Any, **kwargs: Any) -> socket.socket:
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", slow)
    config = cfg(m={"provider": "openai", "model": "x", "base_url": "http://llm.invalid/v1"})
    errors, warnings = check_models(config, {"m"})
    assert not errors
    assert len(warnings) == 1 and "model 'm'" in warnings[0] and "llm.invalid" in warnings[0]


def test_a_proxy_is_trusted_to_know_the_way(
    offline: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    config = cfg(m={"provider": "openai", "model": "x"})
    assert check_models(config, {"m"}) == ([], [])
    assert not offline


def test_offline_models_are_not_probed(offline: list[str]) -> None:
    assert preflight.reachability(cfg(m={"provider": "mock"}), {"m"}) == ({}, [])
    assert not offline


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_shipped_config_offline_stops_before_its_first_job(tmp_path: Path) -> None:
    """The README's real run, keys set, on a machine with no network: a few lines naming
    each model and its host, before any job; no retries, no job's list of outputs."""
    copy_workflow(tmp_path)
    env = {"ANTHROPIC_API_KEY": "x", "OPENAI_API_KEY": "y"}
    run = command(
        tmp_path,
        "snakemake --cores 10 results/gpt-target/results.json",
        env={**os.environ, **env},
        offline=True,
    )
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-3000:]
    assert "localrule" not in out and "Error in rule" not in out, out[-3000:]
    assert len(out.splitlines()) < 60, out[-3000:]
    assert "model 'gpt'" in out and "api.openai.com" in out, out[-3000:]
    assert "model 'sonnet'" in out and "api.anthropic.com" in out, out[-3000:]
    assert not (tmp_path / "data" / "seeds").exists()


@pytest.mark.timeout(120)
def test_ping_offline_says_what_the_runs_check_says(tmp_path: Path, offline: list[str]) -> None:
    """`kora ping` on a machine with no network: each model's line says what the run's own
    check before its first job says of the same failure (one place words it): the host
    does not resolve, check this machine's internet connection and DNS; not "is the
    service running"."""
    from kora.config.files import load_run_config

    copy_workflow(tmp_path)
    env = {**os.environ, "ANTHROPIC_API_KEY": "x", "OPENAI_API_KEY": "y"}
    done = command(tmp_path, "kora ping gpt-target", env=env, offline=True)
    assert done.returncode == 1, done.stdout + done.stderr
    config, _ = load_run_config([], workdir=tmp_path)
    checked, _ = check_models(config, {"gpt", "sonnet"})
    lines = done.stdout.splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    for model, host in (("gpt", "api.openai.com"), ("sonnet", "api.anthropic.com")):
        pinged = [x for x in lines if x.split(":")[0].endswith(f" {model}")]
        said = next(e for e in checked if f"model {model!r}" in e)
        assert pinged, done.stdout
        for line in pinged:
            assert f"the host {host} does not resolve" in line, line
            assert "is the service running" not in line, line
            # the same words from the reason on
            assert (
                line[line.index(" does not resolve") :] == said[said.index(" does not resolve") :]
            )
