"""The provider interface: one small async surface every model backend implements.

A provider turns a `Request` into a `Response`, or raises a `ProviderError` that says
whether it is worth retrying. Everything around a call (cache, rate limits, retries, schema
validation, usage) lives in `kora.llm.client`, once, for every provider; which provider a
config names is `kora.llm.registry`'s business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Protocol, TypedDict

import orjson
from pydantic import BaseModel

from kora.llm.headers import ServerLimits
from kora.llm.retry import is_transient

Role = Literal["user", "assistant"]

# Why a target's reply ended, in one vocabulary across providers: `stop` (it finished),
# `max_tokens` (cut at the length limit), `content_filter` (the provider's filter cut or
# blocked it), `refusal` (the model declined through the API's refusal channel), `other`
# (any other reason the provider gave). None: the service does not say (chat endpoints).
FinishReason = Literal["stop", "max_tokens", "content_filter", "refusal", "other"]
FINISH_REASONS: tuple[FinishReason, ...] = (
    "stop",
    "max_tokens",
    "content_filter",
    "refusal",
    "other",
)


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

    def prompt_chars(self) -> int:
        """The characters the model reads: system prompt, messages and the answer's
        schema (what the token limits and the budget estimate its input from)."""
        chars = len(self.system or "") + sum(len(m.content) for m in self.messages)
        if self.schema is not None:
            chars += len(_schema_json(self.schema))
        return chars


@dataclass(frozen=True)
class Response:
    text: str  # plain text, or the JSON document of a structured answer
    input_tokens: int = 0  # not counting the two below
    output_tokens: int = 0
    # the part of output_tokens a model spent reasoning, where its API says (Anthropic's
    # thinking, OpenAI's reasoning tokens): priced as output, never shown as text
    reasoning_tokens: int = 0
    # prompt-cache tokens: written to the provider's cache, and read from it
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    # the input tokens the provider's input-token limit counted, when not input_tokens
    # (Anthropic: cache writes count, reads do not; OpenAI: cached tokens count)
    limit_input_tokens: int | None = None
    # why the answer ended, in FinishReason's words above (None: the API did not say)
    finish_reason: FinishReason | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    # the provider's rate-limit headers on this answer (never stored with it)
    limits: ServerLimits | None = None


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
        limits: ServerLimits | None = None,
        config_error: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        # the server refused the request itself (kora.llm.wire.faults): never retried, and the
        # model's calls stop, with what to change in its config
        self.config_error = config_error
        self._retryable = False if config_error else retryable
        # no connection could be made (refused, unknown host): retried only briefly, then
        # a configuration error that stops the job
        self.unreachable = unreachable
        # the rate-limit headers of a refusal: which bucket ran out, and until when
        self.limits = limits

    @property
    def retryable(self) -> bool:
        if self._retryable is not None:
            return self._retryable
        return is_transient(self.status)


class BlockedError(ProviderError):
    """A chat service says the app under test cannot be used now (captcha, login
    required, rate limit, ...): that test is recorded with the reason, not retried in the
    run and not a reason to stop the others."""

    def __init__(self, label: str, reason: str) -> None:
        super().__init__(f"{label}: the app is blocked: {reason}", retryable=False)
        self.reason = reason


def is_retryable(exc: BaseException) -> bool:
    """Worth another attempt: a provider's retryable error; anything else is a bug or a
    final answer."""
    return isinstance(exc, ProviderError) and exc.retryable


class Provider(Protocol):
    """A model backend (anthropic, openai, mock)."""

    name: str

    async def generate(self, request: Request) -> Response: ...

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


def finish_reasons(words: Mapping[FinishReason, tuple[str, ...]]) -> dict[str, FinishReason]:
    """A provider's words for why an answer ended, looked up as the project's reason."""
    return {word: reason for reason, ws in words.items() for word in ws}


def answer_schema(schema: type[BaseModel]) -> tuple[str, dict[str, Any]]:
    """The name and JSON Schema sent to a provider for a structured answer.

    The name keeps letters, digits, `_` and `-` and at most 64 of them (what both APIs
    accept for a tool or a response format). Length and number bounds are left in the
    schema as documentation for the model where the API accepts them; every answer is
    validated against the pydantic type anyway.
    """
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in schema.__name__)
    return name[:64] or "answer", json_schema(schema)


def json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The type's JSON Schema, a fresh copy the caller may change: pydantic builds it anew
    at every `model_json_schema()` (milliseconds each), and a run asks for it several
    times a call (the call-store key, the token estimate, the request)."""
    return orjson.loads(_schema_json(schema))  # type: ignore[no-any-return]


@cache
def _schema_json(schema: type[BaseModel]) -> bytes:
    # answer types are classes defined once (v2's mechanism types are cached by their
    # mechanisms), so this holds a handful of entries for the life of the process
    return orjson.dumps(schema.model_json_schema())


class TextOptions(TypedDict, total=False):
    """What a text call may say besides its messages (a client's, or a chain's)."""

    system: str | None
    max_tokens: int | None
    hints: dict[str, Any] | None
    accept: Callable[[str], bool] | None  # whether an answer's text is usable
