"""Which provider a model's config names: a name -> factory map, each factory importing
its SDK only when a model of that provider is used (`import anthropic` alone costs more
than a second of CPU)."""

from __future__ import annotations

from collections.abc import Callable

from kora.config.schema import ModelConfig
from kora.llm.base import Provider

ProviderFactory = Callable[[str, ModelConfig], Provider]


def _mock(name: str, config: ModelConfig) -> Provider:
    from kora.llm.mock import MockProvider

    return MockProvider(name, config)


def _anthropic(name: str, config: ModelConfig) -> Provider:
    from kora.llm.anthropic import AnthropicProvider

    return AnthropicProvider(name, config)


def _openai(name: str, config: ModelConfig) -> Provider:
    from kora.llm.openai import OpenAIProvider

    return OpenAIProvider(name, config)


# `chat-endpoint` is not here: a deployed chat service is a target with sessions
# (kora.llm.chat_endpoint), not a provider of single calls.
PROVIDERS: dict[str, ProviderFactory] = {
    "mock": _mock,
    "anthropic": _anthropic,
    "openai": _openai,
}


def create_provider(name: str, config: ModelConfig) -> Provider:
    factory = PROVIDERS.get(config.provider)
    if factory is None:
        raise ValueError(f"model {name!r}: provider {config.provider!r} is not an LLM provider")
    return factory(name, config)
