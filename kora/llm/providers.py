"""A model's provider, made from its kind's entry in the registry (kora.llm.registry)."""

from __future__ import annotations

import importlib

from kora.llm.base import Provider
from kora.llm.config import ModelConfig


def create_provider(name: str, config: ModelConfig) -> Provider:
    kind = config.kind
    if kind.make is None:
        raise ValueError(f"model {name!r}: provider {config.provider!r} is not an LLM provider")
    module, _, cls = kind.make.partition(":")
    provider: Provider = getattr(importlib.import_module(module), cls)(name, config)
    return provider
