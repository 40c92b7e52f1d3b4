"""Every kind of model a config can name, with what it can do: one table, read everywhere a
kind matters (config checks, the roles it may fill, its keys, its prices, how it is made).

How a kind's provider is made is kora.llm.providers.factories' (it imports the provider modules,
which read this table).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# the providers' public APIs
ANTHROPIC_URL = "https://api.anthropic.com"
OPENAI_URL = "https://api.openai.com/v1"

# the request body's fields kora sets itself, which a model's `params` may not
ANTHROPIC_FIELDS = frozenset(("model", "messages", "system", "max_tokens", "tools", "tool_choice",
                              "thinking", "temperature", "stream"))  # fmt: skip
OPENAI_FIELDS = frozenset(("model", "messages", "input", "instructions", "max_tokens",
                           "max_completion_tokens", "max_output_tokens", "response_format",
                           "text", "tools", "tool_choice", "format", "temperature",
                           "reasoning_effort", "reasoning", "stream"))  # fmt: skip

# prompt-cache write and read prices as multiples of the input price, by cache lifetime
CachePrices = dict[str, tuple[float, float]]


@dataclass(frozen=True)
class ProviderKind:
    """What a `provider:` value stands for."""

    name: str
    # a chat service with sessions (kora.llm.providers.service), only ever a target; the others
    # answer single calls in any role, made by kora.llm.providers.factories
    is_service: bool = False
    offline: bool = False  # answers on this machine, deterministic and free (the mock)
    needs_model: bool = False
    needs_base_url: bool = False
    needs_app: bool = False
    described: bool = False  # its requests are described in config (`http:`)
    batch: bool = False  # has a batch API (the offline mock: takes `batch:`)
    batch_price: float = 1.0  # a batch's prices as a multiple of a single call's
    key_env: str | None = None  # the API key's variable unless `api_key_env` says
    # a protocol that local servers speak too (vLLM, Ollama, llama.cpp): at a base URL of
    # one's own, the key may not be needed
    local_servers: bool = False
    url_env: str | None = None  # the base URL's variable unless `base_url` says
    # where its calls go when neither `base_url` nor `url_env` says: the public API
    default_url: str | None = None
    # how it is asked for a structured answer (the manifest's words): Anthropic's forced
    # tool call, OpenAI's json_schema, the mock's own; None: never (a chat service)
    structured: str | None = None
    # takes `structured_output` and `schema_bounds` (kora.llm.providers.structured), which change
    # `structured`: the ways OpenAI-compatible servers take an answer's schema
    structured_modes: bool = False
    # the body field of an answer's token limit: `max_tokens`, or that of the first
    # condition a model meets (a ModelConfig setting that is set, or its test `public_api`)
    token_fields: dict[str, str] = field(default_factory=dict)
    # the ModelConfig settings only some kinds take that this one takes (a reasoning
    # effort, a thinking budget, which API, other body fields)
    takes: tuple[str, ...] = ()
    # the request body's fields kora sets itself, which `params` may not set
    own_fields: frozenset[str] = frozenset()
    # the shortest prompt its cache keeps, in tokens: the first whose word the model's
    # name holds ("": any model)
    cache_minimums: dict[str, int] = field(default_factory=dict)
    # the prompt variants it can run: a chat endpoint always receives an age, so it has no
    # no-age `default`; an app behind an app runner receives neither age nor system prompt
    variants: tuple[str, ...] = ("default", "child")
    # keeps each conversation on its side: it cannot be handed a recorded one to carry on
    keeps_sessions: bool = False
    cache_prices: CachePrices = field(default_factory=dict)

    # publishes the dates its models are retired on (kora.llm.lifecycle)
    retirements: bool = False

    def cache_minimum(self, model: str) -> int:
        return next((n for w, n in self.cache_minimums.items() if w in model.lower()), 0)

    @property
    def billed(self) -> bool:
        """Charges by the token: what its calls cost is known only with a `price`."""
        return not self.offline and not self.is_service


KINDS: dict[str, ProviderKind] = {
    k.name: k
    for k in (
        ProviderKind(
            "anthropic",
            needs_model=True,
            retirements=True,
            batch=True,
            batch_price=0.5,
            key_env="ANTHROPIC_API_KEY",
            url_env="ANTHROPIC_BASE_URL",
            default_url=ANTHROPIC_URL,
            structured="tool",
            takes=("thinking_tokens", "params"),
            own_fields=ANTHROPIC_FIELDS,
            # 1.25x for a write kept 5 minutes, 2x for one kept an hour, 0.1x for a read
            cache_prices={"5m": (1.25, 0.1), "1h": (2.0, 0.1)},
            cache_minimums={"haiku": 2048, "": 1024},
        ),
        ProviderKind(
            "openai",
            needs_model=True,
            batch=True,
            batch_price=0.5,
            key_env="OPENAI_API_KEY",
            local_servers=True,
            url_env="OPENAI_BASE_URL",
            default_url=OPENAI_URL,
            structured="json_schema",
            structured_modes=True,
            # reasoning models refuse max_tokens, wherever they are served; its own API wants
            # max_completion_tokens of every model
            token_fields={
                "reasoning_effort": "max_completion_tokens",
                "public_api": "max_completion_tokens",
            },
            takes=("reasoning_effort", "api", "params"),
            own_fields=OPENAI_FIELDS,
            # caches on its own (prompts of 1,024 tokens or more), without a write premium; a read at half the input price
            cache_prices={"5m": (1.0, 0.5), "1h": (1.0, 0.5)},
        ),
        ProviderKind("mock", offline=True, batch=True, structured="mock"),
        ProviderKind("http", is_service=True, described=True),
        ProviderKind(
            "chat-endpoint",
            is_service=True,
            needs_base_url=True,
            variants=("child",),
            keeps_sessions=True,
        ),
        ProviderKind(
            "app-runner",
            is_service=True,
            needs_base_url=True,
            needs_app=True,
            variants=("default",),
            keeps_sessions=True,
        ),
    )
}


def kind_of(provider: str) -> ProviderKind:
    try:
        return KINDS[provider]
    except KeyError:
        raise ValueError(
            f"unknown provider {provider!r} (expected one of {', '.join(KINDS)})"
        ) from None
