"""Fallback chains: a role's models tried in order, the next one when a call fails.

A role in config.yaml may name several models (`seed_model: [a, b]`), as canonical KORA
v2's comma-separated model lists do. A question goes to the first model; when that one
fails for good (retries used up, or a structured answer invalid twice), the same question
goes to the next, and only the last model's failure is the item's failure. Each model
keeps its own call store entries, rate limits and usage, so a rerun replays whichever
model answered, and `results.json` counts each model's calls and cost apart.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, Unpack

from pydantic import BaseModel

from kora.llm.base import ChatMessage, TextOptions
from kora.llm.client import ModelClient

log = logging.getLogger("kora")

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")
T = TypeVar("T")


def _label(model: object) -> str:
    return str(getattr(model, "name", model))


async def with_fallback(models: Sequence[T], work: Callable[[T], Awaitable[R]], what: str) -> R:
    """`work` on the first model; on its failure on the next, and so on. Raises the last
    model's error; a cancellation (Ctrl-C, a job stopped) is never a reason to fall back."""
    if not models:
        raise ValueError("a fallback chain needs at least one model")
    for i, model in enumerate(models):
        try:
            return await work(model)
        except Exception as exc:
            if i + 1 == len(models):
                raise
            log.warning(
                "[fallback] %s on %s failed (%s: %s); trying %s",
                what,
                _label(model),
                type(exc).__name__,
                f"{exc}"[:200],
                _label(models[i + 1]),
            )
    raise AssertionError("unreachable")


class ModelChain:
    """Several clients behind one `Asker`: each call falls back along the chain."""

    def __init__(self, clients: Sequence[ModelClient]) -> None:
        if len(clients) < 2:
            raise ValueError("a chain has two models or more; use the client itself")
        self.clients = list(clients)

    @property
    def name(self) -> str:
        return " -> ".join(c.name for c in self.clients)

    async def text(
        self, messages: list[ChatMessage], *, stage: str, **options: Unpack[TextOptions]
    ) -> str:
        return await with_fallback(
            self.clients, lambda c: c.text(messages, stage=stage, **options), f"{stage} call"
        )

    async def structured(
        self, messages: list[ChatMessage], schema: type[M], *, stage: str, **options: Any
    ) -> M:
        """As ModelClient.structured (`system`, `hints`), falling back along the chain."""
        return await with_fallback(
            self.clients,
            lambda c: c.structured(messages, schema, stage=stage, **options),
            f"{stage} call",
        )


# what the stages ask a model through: one client, or a chain of them
Asker = ModelClient | ModelChain


def members(model: Asker) -> list[Asker]:
    """The models a role tries in order: a chain's clients, or the client itself."""
    if isinstance(model, ModelChain):
        return list(model.clients)
    return [model]


def as_asker(clients: Sequence[ModelClient]) -> Asker:
    """One client as itself (a role with one model behaves exactly as before); several as
    a chain."""
    return clients[0] if len(clients) == 1 else ModelChain(clients)
