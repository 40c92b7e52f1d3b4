"""Shared test set-up: no back-off waits, fresh limiters, no real endpoints or keys."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kora.llm import limits, retry

# `import loopback` from the test modules (and from spawned worker processes)
TESTS_DIR = str(Path(__file__).resolve().parent)
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)

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
