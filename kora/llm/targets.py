"""The model under test, seen as one conversation session per test."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kora.llm.base import ChatMessage, ChatSession, Response
from kora.llm.client import ModelClient
from kora.llm.usage import Usage


class Target(Protocol):
    """A model under test: it opens a fresh chat session for each test."""

    is_mock: bool

    async def open_session(
        self, age_range: str | None, memory: str | None, system: str
    ) -> ChatSession: ...

    async def aclose(self) -> None: ...


class LLMSession:
    def __init__(self, client: ModelClient, system: str) -> None:
        self.client = client
        self.system = system

    async def reply(self, messages: list[ChatMessage]) -> Response:
        req = self.client.request(messages, system=self.system, hints={"role": "target"})
        return await self.client.call(req, stage="target")


class LLMTarget:
    """A chat model called directly; the system prompt carries the variant and memory."""

    def __init__(self, client: ModelClient) -> None:
        self.client = client
        self.is_mock = client.is_mock

    async def open_session(
        self, age_range: str | None, memory: str | None, system: str
    ) -> LLMSession:
        return LLMSession(self.client, system)

    async def aclose(self) -> None:
        await self.client.aclose()


class EndpointTarget:
    """A deployed chat service: it keeps the history and builds its own system prompt,
    so the rendered one is not sent; its replies are counted as target calls."""

    is_mock = False

    def __init__(self, inner: Any, name: str, usage: Usage) -> None:
        self.inner = inner
        self.name = name
        self.usage = usage

    async def open_session(
        self, age_range: str | None, memory: str | None, system: str
    ) -> ChatSession:
        if age_range is None:
            raise ValueError("a chat endpoint always receives an age: it cannot run `default`")
        session = await self.inner.open_session(age_range, memory)
        return _CountedSession(session, self.name, self.usage)

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class _CountedSession:
    session: ChatSession
    name: str
    usage: Usage

    async def reply(self, messages: list[ChatMessage]) -> Response:
        try:
            resp = await self.session.reply(messages)
        except Exception:
            self.usage.add(self.name, "target", None, None, cached=False)
            raise
        self.usage.add(self.name, "target", resp, None, cached=False)
        return resp
