"""Shared test set-up: no back-off waits, fresh limiters, no real endpoints or keys; and
loopback servers that a test is given started and that are stopped after it, however it
ends (`serve`, `anthropic_server`, `openai_server`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kora.llm import retry
from kora.llm.limits import state
from tests.loopback import AnthropicServer, OpenAIServer, Servers

# Settings that would point a provider at a real service; every test starts without them.
PROVIDER_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)


@pytest.fixture(autouse=True)
def _no_backoff_waits(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in PROVIDER_ENV:
        monkeypatch.delenv(var, raising=False)
    retry.set_testing(True)
    state._registry.clear()  # the in-process limiter state: none left by another test
    yield
    state._registry.clear()


@pytest.fixture
def serve() -> Iterator[Servers]:
    """`serve(ServerClass, **options)`: a loopback server started for this test, with its
    latency, faults or answers as asked; every one is stopped when the test ends."""
    servers = Servers()
    yield servers
    servers.stop_all()


@pytest.fixture
def anthropic_server(serve: Servers) -> AnthropicServer:
    """A loopback Anthropic API with its default answers."""
    return serve(AnthropicServer)


@pytest.fixture
def openai_server(serve: Servers) -> OpenAIServer:
    """A loopback OpenAI API with its default answers."""
    return serve(OpenAIServer)
