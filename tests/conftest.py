"""Shared test set-up: no back-off waits, fresh limiters, no real endpoints or keys; and
loopback servers that a test is given started and that are stopped after it, however it
ends (`serve`, `anthropic_server`, `openai_server`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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


# the checkout's own workspace: a user's bill and call store, which no test may touch
WORKSPACE = Path(__file__).resolve().parents[1] / ".kora"


def _listing(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(autouse=True)
def _the_users_workspace_untouched() -> Iterator[None]:
    """A test that runs kora in the checkout itself (as a user would, for its config and
    taxonomy) must not write into its .kora: the user's bill, which a budget counts, once
    gained the calls of the quick lane's pings."""
    before = _listing(WORKSPACE)
    yield
    after = _listing(WORKSPACE)
    if written := sorted(k for k, size in after.items() if before.get(k) != size):
        pytest.fail(
            "the test (or one running beside it) wrote into the checkout's own workspace: "
            + ", ".join(written[:5])
        )


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
