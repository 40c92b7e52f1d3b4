"""A model's settings in config.yaml (`models:`): what the model layer needs to call it.

The model layer owns these types so that it depends on nothing above it: the run's config
(kora.config) holds a mapping of them.
"""

from __future__ import annotations

import os
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kora.llm.bounds import DEFAULT_MAX_REPLY_BYTES
from kora.llm.registry import KINDS, ProviderKind, kind_of
from kora.llm.service_config import HttpSpec

# how an OpenAI-compatible server is sent a structured answer's schema, and whether with
# its length and count bounds (kora.llm.structured)
StructuredOutput = Literal["json_schema", "json_object", "ollama_format", "tool", "prompt"]
SchemaBounds = bool | Literal["minimums"]


class _Strict(BaseModel):
    # strict: YAML gives real types, and `seeds_per_task: true` must not pass for 1
    model_config = ConfigDict(extra="forbid", strict=True)


class Price(_Strict):
    """US dollars per million tokens. Prompt-cache writes and reads default to the
    provider's published multiples of `input` (`ModelConfig.cost_price`)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float | None = Field(default=None, ge=0)
    cache_read: float | None = Field(default=None, ge=0)


class ModelConfig(_Strict):
    provider: str  # a kind of kora.llm.registry's table
    model: str | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    base_url: str | None = None
    api_key_env: str | None = None
    requests_per_minute: float | None = Field(default=None, gt=0)
    # the provider's token limits (Anthropic: input and output apart; OpenAI: together)
    input_tokens_per_minute: float | None = Field(default=None, gt=0)
    output_tokens_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    max_concurrency: int | None = Field(default=None, gt=0)
    # seconds one call may take in all, from connecting to the last byte (kora.llm.bounds)
    timeout: float | None = Field(default=None, gt=0)
    # the largest answer accepted, in bytes: a larger one is a failed call
    max_reply_bytes: int = Field(default=DEFAULT_MAX_REPLY_BYTES, gt=0)
    # a chat service's 3xx answers: followed, or (the default) a failed attempt naming
    # where it pointed
    follow_redirects: bool = False
    price: Price | None = None
    # Anthropic: mark the stable start of each request for the provider's prompt cache,
    # kept 5 minutes or an hour (OpenAI caches on its own)
    prompt_cache: bool = True
    cache_ttl: Literal["5m", "1h"] = "5m"
    # send the calls in the provider's batches, at its batch price (kora.llm.batch)
    batch: bool = False
    # OpenAI-compatible servers: how a structured answer's schema is sent (None: OpenAI's
    # json_schema), and whether its length and count bounds go with it (or only their
    # minimums); answers are checked against the full schema either way
    # (kora.llm.structured). Like base_url, a transport setting: the call store and the
    # rule params leave them out
    structured_output: StructuredOutput | None = None
    schema_bounds: SchemaBounds = True
    # provider http: the service's requests (kora.llm.service_config); app-runner: the app
    http: HttpSpec | None = None
    app: str | None = None
    # set from the config's top-level `reask_invalid_answers` through the rule params
    # (kora.config.schema.KoraConfig.model_params), never under `models:`: false asks a
    # structured answer once, as the reference does, and an invalid one fails its item;
    # left out of a dump, which a config read back from it would refuse under `models:`
    reask_invalid_answers: bool = Field(default=True, exclude=True)

    @field_validator("provider")
    @classmethod
    def _known_kind(cls, name: str) -> str:
        if name not in KINDS:
            raise ValueError(f"unknown provider {name!r} (expected one of {', '.join(KINDS)})")
        return name

    @field_validator("schema_bounds", mode="before")
    @classmethod
    def _bounds(cls, value: object) -> object:
        if value is not True and value is not False and value != "minimums":
            raise ValueError("expected true, false or minimums")
        return value

    @property
    def cost_price(self) -> Price | None:
        """`price` with the prompt-cache prices filled in from the provider's multiples."""
        p = self.price
        if p is None:
            return None
        write, read = self.kind.cache_prices.get(self.cache_ttl, (1.0, 1.0))
        return p.model_copy(
            update={
                "cache_write": p.input * write if p.cache_write is None else p.cache_write,
                "cache_read": p.input * read if p.cache_read is None else p.cache_read,
            }
        )

    @property
    def batch_cost_price(self) -> Price | None:
        """`cost_price` for an answer that came in a batch: at the provider's multiple."""
        p, times = self.cost_price, self.kind.batch_price
        if p is None:
            return None
        return p.model_copy(update={k: v * times for k, v in p.model_dump().items()})

    @property
    def kind(self) -> ProviderKind:
        """What its provider can do (kora.llm.registry)."""
        return kind_of(self.provider)

    @property
    def is_service(self) -> bool:
        """A chat service with sessions (only ever a target), not an LLM provider."""
        return self.kind.is_service

    def endpoint(self) -> tuple[str, str] | None:
        """(URL, what set it) for where this model's calls go: its `base_url`
        ("base_url"), else its provider's URL variable (that variable's name), else the
        provider's public API ("public"); a service's fixed request URL ("http.turn.url").
        None when no one address can be named: the offline mock, a templated URL."""
        if self.kind.offline:
            return None
        if self.base_url:
            return self.base_url, "base_url"
        env = self.kind.url_env
        if env and os.environ.get(env):
            return os.environ[env], env
        if self.kind.default_url:
            return self.kind.default_url, "public"
        if self.http is not None and "{" not in self.http.turn.url:
            return self.http.turn.url, "http.turn.url"
        return None

    def public_api(self) -> bool:
        """Whether its calls go to its provider's own public API."""
        where, public = self.endpoint(), self.kind.default_url
        return (
            where is not None
            and public is not None
            and urlsplit(where[0]).hostname == urlsplit(public).hostname
        )

    def output_settings(self) -> dict[str, Any]:
        """What changes a model's answers: rule params and cache keys use only these.

        Rate limits, timeouts, keys, headers and (except for a chat service, whose URL
        *is* the model under test) the base URL are transport settings and leave results
        valid.
        """
        out: dict[str, Any] = {"provider": self.provider, "model": self.model}
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.is_service:
            out["base_url"] = self.base_url
        if self.http is not None:
            out["http"] = self.http.model_dump(
                exclude={"headers": True, **{s: {"headers"} for s in self.http.requests()}},
                exclude_none=True,
            )
        if self.app is not None:
            out["app"] = self.app
        return out
