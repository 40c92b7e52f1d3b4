"""How each kind of model that answers single calls is made: one factory per kind of the
registry (kora.llm.registry) that is not a chat service; and what a model's client is
made with: what its calls share with the run and the process (`Shared`).

Each factory imports its module only when a model of that kind is used (`import
anthropic` alone costs more than a second of CPU); being plain functions, mypy and
lint-imports see the imports (kora.llm.registry cannot hold them: every provider module
reads it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from kora.llm.base import Provider
from kora.llm.limits import Limiter, limiter_for
from kora.llm.money.bill import BillWriter
from kora.llm.money.budget import Budget
from kora.llm.money.usage import Usage
from kora.llm.settings.config import ModelConfig
from kora.llm.shared_calls import SharedCalls
from kora.llm.store.cache import CallCache


def _anthropic(name: str, config: ModelConfig) -> Provider:
    from kora.llm.providers.anthropic import AnthropicProvider

    return AnthropicProvider(name, config)


def _openai(name: str, config: ModelConfig) -> Provider:
    from kora.llm.providers.openai import OpenAIProvider

    return OpenAIProvider(name, config)


def _mock(name: str, config: ModelConfig) -> Provider:
    from kora.llm.providers.mock import MockProvider

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


@dataclass
class Shared:
    """What a job's clients share with the run and the process. `limits`: where limiters
    share their state with the run's other processes (None: this process's alone);
    `sends` False: the models send nothing (`kora plan`), so they take no limiter's slots
    and make no batches; `ahead`: the calls are made before the jobs ask (kora.run.broker.prefetch)."""

    store: CallCache | None = None
    usage: Usage = field(default_factory=Usage)
    shared_calls: SharedCalls | None = None
    bill: BillWriter | None = None
    budget: Budget | None = None
    limits: Path | None = None
    # the process's providers, one per model and config (an HTTP client, an SDK); those
    # `fixed` by a model's name are used instead (tests; `kora plan`'s replay)
    made: dict[tuple[str, str], Provider] = field(default_factory=dict)
    fixed: dict[str, Provider] = field(default_factory=dict)
    sends: bool = True
    ahead: bool = False
    # what closes what belongs to the job (a chat service's HTTP client), at its end
    closing: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def provider(self, name: str, config: ModelConfig) -> Provider:
        if name in self.fixed:
            return self.fixed[name]
        key = (name, config.model_dump_json())
        if key not in self.made:
            self.made[key] = create_provider(name, config)
        return self.made[key]

    def limiter(self, name: str, config: ModelConfig) -> Limiter:
        return limiter_for(name, config, self.limits) if self.sends else Limiter(adaptive=False)

    async def aclose(self) -> None:
        closing, self.closing = self.closing, []
        for close in closing:
            await close()
