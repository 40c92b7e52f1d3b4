"""Shared test set-up: no back-off waits, fresh limiters, no real endpoints or keys."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kora.llm import limits, retry

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
    limits.reset_limiters()
    yield
    limits.reset_limiters()
