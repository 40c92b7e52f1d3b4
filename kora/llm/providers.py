"""How each kind of model that answers single calls is made: one factory per kind of the
registry (kora.llm.registry) that is not a chat service.

Each factory imports its module only when a model of that kind is used (`import
anthropic` alone costs more than a second of CPU); being plain functions, mypy and
lint-imports see the imports (kora.llm.registry cannot hold them: every provider module
reads it).
"""

from __future__ import annotations

from collections.abc import Callable

from kora.llm.base import Provider
from kora.llm.config import ModelConfig


def _anthropic(name: str, config: ModelConfig) -> Provider:
    from kora.llm.anthropic import AnthropicProvider

    return AnthropicProvider(name, config)


def _openai(name: str, config: ModelConfig) -> Provider:
    from kora.llm.openai import OpenAIProvider

    return OpenAIProvider(name, config)


def _mock(name: str, config: ModelConfig) -> Provider:
    from kora.llm.mock import MockProvider

    return MockProvider(name, config)


FACTORIES: dict[str, Callable[[str, ModelConfig], Provider]] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "mock": _mock,
}


def create_provider(name: str, config: ModelConfig) -> Provider:
    make = FACTORIES.get(config.provider)
    if make is None:
        raise ValueError(f"model {name!r}: provider {config.provider!r} is not an LLM provider")
    return make(name, config)
