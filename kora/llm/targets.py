"""The model under test, seen as one conversation session per test."""

from __future__ import annotations

from typing import Protocol

from kora.llm.base import ChatMessage, ChatSession, Response
from kora.llm.client import ModelClient


class TargetFactory(Protocol):
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

    async def open_session(self, age_range: str | None, memory: str | None, system: str) -> LLMSession:
        return LLMSession(self.client, system)

    async def aclose(self) -> None:
        await self.client.aclose()
