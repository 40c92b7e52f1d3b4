"""A model's settings in config.yaml (`models:`): what the model layer needs to call it.

The model layer owns these types so that it depends on nothing above it: the run's config
(kora.config) holds a mapping of them.
"""

from __future__ import annotations

import enum
import functools
import json
import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator

from kora.llm.registry import KINDS, ProviderKind, kind_of
from kora.llm.settings.bounds import DEFAULT_MAX_REPLY_BYTES
from kora.llm.settings.service_config import ConfigModel, HttpSpec

# how an OpenAI-compatible server is sent a structured answer's schema, and whether with
# its length and count bounds (kora.llm.providers.structured)
StructuredOutput = Literal["json_schema", "json_object", "ollama_format", "tool", "prompt"]
SchemaBounds = bool | Literal["minimums"]
# an OpenAI-protocol reasoning model's effort
Effort = Literal["minimal", "low", "medium", "high"]
# an answer's token limit when neither the call nor the model says
DEFAULT_MAX_TOKENS = 4000
# the settings only some kinds take (ProviderKind.takes), each changing its answers
SETTINGS = ("reasoning_effort", "thinking_tokens", "api", "params")


def said_settings(model: Mapping[str, Any]) -> str:
    """A model's settings of `SETTINGS`, as ping, the report and the leaderboard name them
    (`reasoning_effort low, api responses`); "" with none."""
    return ", ".join(
        f"{k} {json.dumps(v) if isinstance(v, dict) else v}"
        for k in SETTINGS
        if (v := model.get(k)) is not None
    )


class Changes(enum.Enum):
    """What a model setting changes, declared once on its `ModelConfig` field (`Annotated`):
    the rule params and the call store's key (`output_settings`) and what a job takes from
    the run's config by model name (`of_job`) follow from it."""

    # the model's answers: a rule param (a change re-runs the shards it made) and part of
    # the call store's key; left out of both while unset
    ANSWERS = "answers"
    # which model answers: as ANSWERS, and named even when unset
    MODEL = "model"
    # no answer: it carries the calls, and a job takes it from the run's config by model
    # name (a change re-runs nothing)
    TRANSPORT = "transport"
    # TRANSPORT, but for a chat service, whose URL is the model under test: MODEL
    ENDPOINT = "endpoint"
    # a chat service's requests: ANSWERS, but for their headers (secrets): TRANSPORT
    REQUESTS = "requests"
    # a run's results, not an answer: the config's top-level key, given to the jobs in
    # their params (kora.config.schema.KoraConfig.model_params), never in a call's key
    RESULTS = "results"


# what a job takes from the run's config by model name rather than from its params
_CARRIED = (Changes.TRANSPORT, Changes.ENDPOINT, Changes.REQUESTS)


@functools.cache
def _changes(cls: type[BaseModel]) -> dict[str, Changes]:
    """What each setting of a model config changes, in the order they are declared."""
    out = {}
    for name, info in cls.model_fields.items():
        declared = [m for m in info.metadata if isinstance(m, Changes)]
        if not declared:
            raise TypeError(f"{cls.__name__}.{name}: undeclared (Annotated[..., Changes.X])")
        out[name] = declared[0]
    return out


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, mappings merged key by key (a service's `http` in the
    params leaves out its headers, which come from the config)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


class Price(ConfigModel):
    """US dollars per million tokens. Prompt-cache writes and reads default to the
    provider's published multiples of `input` (`ModelConfig.cost_price`)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float | None = Field(default=None, ge=0)
    cache_read: float | None = Field(default=None, ge=0)


class ModelConfig(ConfigModel):
    """A model's settings, each declaring what it changes (`Changes`)."""

    provider: Annotated[str, Changes.MODEL]  # a kind of kora.llm.registry's table
    model: Annotated[str | None, Changes.MODEL] = None
    max_tokens: Annotated[int | None, Changes.ANSWERS] = Field(default=None, gt=0)
    temperature: Annotated[float | None, Changes.ANSWERS] = Field(default=None, ge=0, le=2)
    base_url: Annotated[str | None, Changes.ENDPOINT] = None
    api_key_env: Annotated[str | None, Changes.TRANSPORT] = None
    requests_per_minute: Annotated[float | None, Changes.TRANSPORT] = Field(default=None, gt=0)
    # the provider's token limits (Anthropic: input and output apart; OpenAI: together)
    input_tokens_per_minute: Annotated[float | None, Changes.TRANSPORT] = Field(default=None, gt=0)
    output_tokens_per_minute: Annotated[float | None, Changes.TRANSPORT] = Field(default=None, gt=0)
    tokens_per_minute: Annotated[float | None, Changes.TRANSPORT] = Field(default=None, gt=0)
    max_concurrency: Annotated[int | None, Changes.TRANSPORT] = Field(default=None, gt=0)
    # seconds one call may take in all, from connecting to the last byte (kora.llm.settings.bounds)
    timeout: Annotated[float | None, Changes.TRANSPORT] = Field(default=None, gt=0)
    # the largest answer accepted, in bytes: a larger one is a failed call
    max_reply_bytes: Annotated[int, Changes.TRANSPORT] = Field(DEFAULT_MAX_REPLY_BYTES, gt=0)
    # a chat service's 3xx answers: followed, or (the default) a failed attempt naming
    # where it pointed
    follow_redirects: Annotated[bool, Changes.TRANSPORT] = False
    price: Annotated[Price | None, Changes.TRANSPORT] = None
    # Anthropic: mark the stable start of each request for the provider's prompt cache,
    # kept 5 minutes or an hour (OpenAI caches on its own)
    prompt_cache: Annotated[bool, Changes.TRANSPORT] = True
    cache_ttl: Annotated[Literal["5m", "1h"], Changes.TRANSPORT] = "5m"
    # send the calls in the provider's batches, at its batch price (kora.llm.providers.batch)
    batch: Annotated[bool, Changes.TRANSPORT] = False
    # OpenAI-compatible servers: how a structured answer's schema is sent (None: OpenAI's
    # json_schema), and whether its length and count bounds go with it (or only their
    # minimums); answers are checked against the full schema either way
    # (kora.llm.providers.structured)
    structured_output: Annotated[StructuredOutput | None, Changes.TRANSPORT] = None
    schema_bounds: Annotated[SchemaBounds, Changes.TRANSPORT] = True
    # provider http: the service's requests (kora.llm.settings.service_config); app-runner: the app
    http: Annotated[HttpSpec | None, Changes.REQUESTS] = None
    app: Annotated[str | None, Changes.ANSWERS] = None
    # how much a reasoning model reasons: OpenAI-protocol models, sent as chat completions'
    # `reasoning_effort` or the Responses API's `reasoning.effort`; Anthropic's extended
    # thinking budget in tokens, a part of `max_tokens`
    reasoning_effort: Annotated[Effort | None, Changes.ANSWERS] = None
    thinking_tokens: Annotated[int | None, Changes.ANSWERS] = Field(default=None, gt=0)
    # OpenAI-protocol models: chat completions (unset, or `chat`), or the Responses API for
    # every call
    api: Annotated[Literal["responses"] | None, Changes.ANSWERS] = None
    # other body fields, sent as given (not those kora sets: its kind's `own_fields`)
    params: Annotated[dict[str, Any] | None, Changes.ANSWERS] = None
    # false asks a structured answer once, as the reference does, and an invalid one fails
    # its item; left out of a dump, which a config read back from it would refuse under
    # `models:`
    reask_invalid_answers: Annotated[bool, Changes.RESULTS] = Field(default=True, exclude=True)

    @field_validator("provider")
    @classmethod
    def _known_kind(cls, name: str) -> str:
        if name not in KINDS:
            raise ValueError(f"unknown provider {name!r} (expected one of {', '.join(KINDS)})")
        return name

    @field_validator("api", mode="before")
    @classmethod
    def _chat(cls, value: object) -> object:
        return None if value == "chat" else value  # the default, named or not

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

    def api_key(self) -> tuple[str | None, bool]:
        """The variable its API key is read from, and whether its calls need one: the
        `api_key_env` it names (needed), else its kind's variable, needed but at a server
        of one's own speaking a protocol local servers speak too (vLLM, Ollama)."""
        if self.api_key_env:
            return self.api_key_env, True
        env = self.kind.key_env
        return env, env is not None and not (self.kind.local_servers and not self.public_api())

    def token_field(self) -> str:
        """The request body's field for an answer's token limit (its kind's `token_fields`)."""
        for condition, name in self.kind.token_fields.items():
            met = getattr(self, condition)
            if met() if callable(met) else met is not None:
                return name
        return "max_tokens"

    @property
    def reasons(self) -> bool:
        """Set to reason before it answers: every call then gets the model's whole
        `max_tokens` (reasoning included), never a call's own smaller limit."""
        return self.reasoning_effort is not None or self.thinking_tokens is not None

    def setting_problem(self) -> tuple[tuple[str, ...], str] | None:
        """(the settings at fault, the first the one to change; what is wrong) when it sets
        what its kind does not take, or what its provider refuses together (check-config)."""
        kind = self.kind
        for key in SETTINGS:
            if getattr(self, key) is not None and key not in kind.takes:
                takers = " and ".join(k.name for k in KINDS.values() if key in k.takes)
                return (key,), f"only for {takers} models"
        if own := sorted(set(self.params or {}) & kind.own_fields):
            return (f"params.{own[0]}",), (
                "kora sets it (from the model's own keys, such as max_tokens, temperature, "
                "reasoning_effort and thinking_tokens, and from each call)"
            )
        reasoning = "thinking_tokens" if self.reasoning_effort is None else "reasoning_effort"
        if self.reasons and self.temperature not in (None, 1):
            return ("temperature", reasoning), "a model that reasons takes no temperature but 1"
        budget, most = self.thinking_tokens, self.max_tokens or DEFAULT_MAX_TOKENS
        if budget is not None and budget < 1024:
            return ("thinking_tokens",), "Anthropic's least thinking budget is 1,024 tokens"
        if budget is not None and most <= budget:
            unset = "" if self.max_tokens else f" (unset, it is {DEFAULT_MAX_TOKENS})"
            return ("max_tokens", "thinking_tokens"), (
                f"must be above thinking_tokens ({budget}), which it includes{unset}"
            )
        if self.api == "responses" and self.structured_mode != "json_schema":
            return ("structured_output", "api"), (
                "the Responses API takes the schema its own way (`text.format`): leave "
                "structured_output out"
            )
        return None

    @property
    def structured_mode(self) -> str | None:
        """How it is asked for a structured answer: its `structured_output`, else its kind's."""
        return self.structured_output or self.kind.structured

    def output_settings(self) -> dict[str, Any]:
        """What changes the model's answers, as each setting declares (`Changes`): rule
        params and call-store keys use only these."""
        out: dict[str, Any] = {}
        named = (Changes.MODEL, Changes.ENDPOINT) if self.is_service else (Changes.MODEL,)
        for name, changes in _changes(type(self)).items():
            value = getattr(self, name)
            if changes is Changes.REQUESTS and value is not None:
                headers = {"headers": True, **{s: {"headers"} for s in value.requests()}}
                value = value.model_dump(exclude=headers, exclude_none=True)
            answers = changes in (Changes.ANSWERS, Changes.REQUESTS) and value is not None
            if changes in named or answers:
                out[name] = value
        return out

    @classmethod
    def of_job(cls, params: Mapping[str, Any], configured: Mapping[str, Any]) -> Self:
        """A job's model: its rule params (`output_settings`, its name and the run's
        settings) over what carries its calls, from its settings in the run's config
        (`configured`, by model name: a change there re-runs nothing)."""
        changes = _changes(cls)
        carried = {k: v for k, v in configured.items() if changes.get(k) in _CARRIED}
        return cls.model_validate(_merge(carried, {k: v for k, v in params.items() if k != "name"}))
