"""The model under test, seen as one conversation session per test.

A session answers the child's turns (`reply`) and is closed when the test ends
(`close`, which tells a chat service whether the test completed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from uuid import uuid4

from kora.llm.base import ChatMessage, ChatSession, Response
from kora.llm.client import ModelClient
from kora.llm.providers.factories import Shared
from kora.llm.settings.config import ModelConfig

if TYPE_CHECKING:  # imported when a chat service is used (aiohttp, jinja2)
    from kora.llm.providers.service import ServiceSession, ServiceTarget


class Session(ChatSession, Protocol):
    async def close(self, outcome: str = "completed") -> None: ...


@dataclass(frozen=True)
class SessionSpec:
    """What a target is told when a test starts."""

    age_range: str | None  # None: the `default` variant, no age given
    memory: str | None
    system: str  # the variant's rendered system prompt
    variant: str
    test_key: str


class Target(Protocol):
    """A model under test: it opens a fresh chat session for each test."""

    is_mock: bool

    async def open_session(self, spec: SessionSpec) -> Session: ...

    async def aclose(self) -> None: ...


class LLMSession:
    def __init__(self, client: ModelClient, system: str) -> None:
        self.client = client
        self.system = system

    async def reply(self, messages: list[ChatMessage]) -> Response:
        req = self.client.request(messages, system=self.system, hints={"role": "target"})
        return await self.client.call(req, stage="target")

    async def close(self, outcome: str = "completed") -> None:
        return None


class LLMTarget:
    """A chat model called directly; the system prompt carries the variant and memory."""

    def __init__(self, client: ModelClient) -> None:
        self.client = client
        self.is_mock = client.is_mock

    async def open_session(self, spec: SessionSpec) -> LLMSession:
        return LLMSession(self.client, spec.system)

    async def aclose(self) -> None:
        await self.client.aclose()


def open_target(name: str, config: ModelConfig, shared: Shared) -> Target:
    """The model under test of one whole model config: an LLM called directly, or a
    deployed chat service (whose HTTP client is the job's: closed with `shared`)."""
    if not config.is_service:
        return LLMTarget(ModelClient(name, config, shared))
    from kora.llm.providers.service import ServiceTarget

    endpoint = ServiceTarget(name, config, limiter=shared.limiter(name, config))
    target = EndpointTarget(endpoint, name, shared)
    shared.closing.append(target.aclose)
    return target


@dataclass
class EndpointTarget:
    """A chat service (kora.llm.providers.service): its own requests carry what it is sent (the
    rendered system prompt only where its description asks for `system`); its replies
    are counted as target calls and billed, each under a key of its own that the shard's
    status names (usage.json finds its line of the bill by it), never stored (a stateful
    service could not replay them)."""

    inner: ServiceTarget
    name: str
    shared: Shared
    is_mock: bool = False

    async def open_session(self, spec: SessionSpec) -> Session:
        try:
            session = await self.inner.open_session(
                spec.age_range,
                spec.memory,
                spec.system,
                variant=spec.variant,
                test_key=spec.test_key,
            )
        except Exception:
            self.shared.usage.add(self.name, "target", failed=True)
            raise
        return _CountedSession(session, self.name, self.shared)

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class _CountedSession:
    session: ServiceSession
    name: str
    shared: Shared

    async def close(self, outcome: str = "completed") -> None:
        await self.session.close(outcome)

    async def reply(self, messages: list[ChatMessage]) -> Response:
        try:
            resp = await self.session.reply(messages)
        except Exception:
            self.shared.usage.add(self.name, "target", failed=True)
            raise
        key = uuid4().hex  # hex, as the store's keys (its packs index them by hex prefix)
        if self.shared.bill is not None:
            self.shared.bill.charge(self.name, "target", resp, None, key=key)
        self.shared.usage.add(self.name, "target")
        self.shared.usage.use(key, self.name, "target")
        return resp
