"""The provider interface: one small async surface every model backend implements.

A provider turns a `Request` into a `Response` and says which of its exceptions are worth
retrying. Everything around a call (cache, rate limits, retries, schema validation, usage)
lives in `kora.llm.client`, once, for every provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from kora.config import ModelConfig
from kora.llm.retry import is_transient
from kora.schemas import FinishReason

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True)
class Request:
    """One model call. `schema` set means a structured (JSON) answer of that type."""

    messages: tuple[ChatMessage, ...]
    system: str | None = None
    schema: type[BaseModel] | None = None
    max_tokens: int = 4000
    temperature: float | None = None
    # Facts about the call the offline mock uses to answer plausibly (requested count, age
    # range, role). Never part of the cache key: the prompt already carries them.
    hints: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Response:
    text: str  # plain text, or the JSON document of a structured answer
    input_tokens: int = 0
    output_tokens: int = 0
    # why the answer ended, mapped onto kora.schemas.FinishReason (None: not said)
    finish_reason: FinishReason | None = None
    meta: dict[str, Any] = field(default_factory=dict)


class ProviderError(Exception):
    """A call failed. `status` is the HTTP status when there was one.

    Messages name the model and the status, never the key.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
        unreachable: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self._retryable = retryable
        # no connection could be made (refused, unknown host): retried only briefly, then
        # a configuration error that stops the job
        self.unreachable = unreachable

    @property
    def retryable(self) -> bool:
        if self._retryable is not None:
            return self._retryable
        return is_transient(self.status)


class Provider(Protocol):
    """A model backend (anthropic, openai, mock)."""

    name: str

    async def generate(self, request: Request) -> Response: ...

    def should_retry(self, exc: BaseException) -> bool: ...

    async def aclose(self) -> None: ...


class ChatSession(Protocol):
    """One test's conversation with a target: an LLM with a system prompt, or a deployed
    chat service that keeps the history on its side."""

    async def reply(self, messages: list[ChatMessage]) -> Response: ...


def clean_text(text: str) -> str:
    """An answer's text as valid Unicode: JSON may carry an unpaired surrogate escape
    (`\\ud800`), which no file can hold; it becomes U+FFFD (paired ones are joined)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def schema_name(schema: type[BaseModel]) -> str:
    return schema.__name__


def json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema sent to a provider for a structured answer.

    Length and number bounds are left in as documentation for the model where the API
    accepts them; every answer is validated against the pydantic type anyway.
    """
    return schema.model_json_schema()


ProviderFactory = Any  # Callable[[str, ModelConfig], Provider]; kept loose for lazy imports


def create_provider(name: str, config: ModelConfig) -> Provider:
    """Registry of providers by config name; SDKs are imported only when used."""
    if config.provider == "mock":
        from kora.llm.mock import MockProvider

        return MockProvider(name, config)
    if config.provider == "anthropic":
        from kora.llm.anthropic import AnthropicProvider

        return AnthropicProvider(name, config)
    if config.provider == "openai":
        from kora.llm.openai import OpenAIProvider

        return OpenAIProvider(name, config)
    raise ValueError(f"model {name!r}: provider {config.provider!r} is not an LLM provider")
