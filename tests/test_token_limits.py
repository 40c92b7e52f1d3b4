"""Token limits and the providers' rate-limit headers: the maths with a made-up clock,
the header forms, the config keys, and whole runs through the real SDK / aiohttp against
loopback servers that enforce a token limit and send the headers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from kora.benchmarks.taxonomy import load_taxonomy
from kora.config.checks import validate_config
from kora.errors import ConfigError
from kora.llm.base import ChatMessage, ProviderError, Request
from kora.llm.client import ModelClient
from kora.llm.headers import (
    Reading,
    ServerLimits,
    from_anthropic,
    from_openai,
    parse_duration,
    parse_time,
)
from kora.llm.limits import (
    Cost,
    Limiter,
    RatePolicy,
    RateTuning,
    TokenPolicy,
    estimated_cost,
    limiter_for,
)
from kora.llm.settings.config import ModelConfig
from kora.llm.store.cache import cache_key
from tests.helpers import REPO
from tests.loopback import AnthropicServer, OpenAIServer

ProviderName = Literal["anthropic", "openai"]

# --- headers ---------------------------------------------------------------------------


def test_openai_reset_durations() -> None:
    assert parse_duration("1s") == 1.0
    assert parse_duration("6m0s") == 360.0
    assert parse_duration("20ms") == pytest.approx(0.02)
    assert parse_duration("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_duration("0.5") == 0.5
    assert parse_duration("soon") is None
    assert parse_duration("") is None


def test_rfc3339_times() -> None:
    assert parse_time("1970-01-01T00:01:00Z") == 60.0
    assert parse_time("1970-01-01T01:00:30+01:00") == 30.0
    assert parse_time("1970-01-01T00:00:10.500Z") == 10.5
    assert parse_time("tomorrow") is None


def test_anthropic_headers_in_the_neutral_form() -> None:
    limits = from_anthropic(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "49",
            "anthropic-ratelimit-requests-reset": "1970-01-01T00:00:01Z",
            "anthropic-ratelimit-input-tokens-limit": "30000",
            "anthropic-ratelimit-input-tokens-remaining": "27000",
            "anthropic-ratelimit-input-tokens-reset": "1970-01-01T00:00:06Z",
            "anthropic-ratelimit-output-tokens-limit": "8000",
            "anthropic-ratelimit-output-tokens-remaining": "8000",
            "anthropic-ratelimit-output-tokens-reset": "1970-01-01T00:00:00Z",
            "anthropic-ratelimit-tokens-remaining": "8000",  # the tighter of the two above
        }
    )
    assert limits == ServerLimits(
        requests=Reading(50, 49, 1.0),
        input_tokens=Reading(30000, 27000, 6.0),
        output_tokens=Reading(8000, 8000, 0.0),
    )
    assert from_anthropic({"content-type": "application/json"}) is None


def test_openai_headers_in_the_neutral_form() -> None:
    limits = from_openai(
        {
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-reset-requests": "120ms",
            "x-ratelimit-limit-tokens": "30000",
            "x-ratelimit-remaining-tokens": "29000",
            "x-ratelimit-reset-tokens": "2s",
        },
        now=100.0,
    )
    assert limits == ServerLimits(
        requests=Reading(500, 499, pytest.approx(100.12)),
        tokens=Reading(30000, 29000, 102.0),
    )
    assert from_openai({}, now=0.0) is None


# --- token buckets, with a made-up clock ------------------------------------------------


def test_an_input_token_limit_spaces_calls_by_their_tokens() -> None:
    policy = TokenPolicy({"input_tokens": 60_000}, horizon=1.0)  # 1,000 tokens/s
    st = None
    waits = []
    for _ in range(6):
        st, wait, reserved = policy.reserve(st, Cost(250, 4000), 1000.0)
        if not reserved:
            break
        waits.append(wait)
    # 250 tokens each: one call every 0.25 s, as far as a second ahead; output is free
    assert waits == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    assert not reserved


def test_tokens_per_minute_counts_input_and_output_together() -> None:
    policy = TokenPolicy({"tokens": 60_000}, horizon=10.0)
    st, _, _ = policy.reserve(None, Cost(300, 700), 0.0)
    st, wait, _ = policy.reserve(st, Cost(300, 700), 0.0)
    assert wait == pytest.approx(1.0)


def test_the_answer_corrects_the_reservation() -> None:
    policy = TokenPolicy({"output_tokens": 60_000}, horizon=100.0)  # 1,000 tokens/s
    st, _, _ = policy.reserve(None, Cost(100, 4000), 0.0)  # max_tokens reserved: 4 s
    _, wait, _ = policy.reserve(st.__class__.unpack(st.pack()), Cost(100, 4000), 0.0)
    assert wait == pytest.approx(4.0)
    # it answered with 500 tokens: 3,500 come back, and the next call starts at 0.5 s
    st = policy.settle(st, Cost(100, 4000), Cost(100, 500), 0.1)
    _, wait, _ = policy.reserve(st, Cost(100, 4000), 0.1)
    assert wait == pytest.approx(0.4)
    # one that used more than estimated pushes the next calls back
    st = TokenPolicy({"input_tokens": 60_000}, horizon=100.0).settle(
        None, Cost(1000, 0), Cost(3000, 0), 0.0
    )
    assert st.buckets["input_tokens"].tat == pytest.approx(2.0)


def test_no_limit_no_pacing() -> None:
    policy = TokenPolicy({})
    st = None
    for _ in range(100):
        st, wait, reserved = policy.reserve(st, Cost(10_000, 10_000), 5.0)
        assert reserved and wait == 0.0


def test_the_servers_limit_paces_without_a_configured_one() -> None:
    policy = TokenPolicy({}, horizon=10.0)
    limits = ServerLimits(input_tokens=Reading(limit=120_000, remaining=100_000, reset=1.0))
    st, short = policy.observe(None, limits, Cost(1000, 0), 0.0)
    assert not short
    st, _, _ = policy.reserve(st, Cost(1000, 0), 0.0)
    st, wait, _ = policy.reserve(st, Cost(1000, 0), 0.0)
    assert wait == pytest.approx(0.5)  # 2,000 tokens/s
    # a configured limit that is lower wins
    lower = TokenPolicy({"input_tokens": 60_000}, horizon=10.0)
    st, _ = lower.observe(None, limits, Cost(1000, 0), 0.0)
    st, _, _ = lower.reserve(st, Cost(1000, 0), 0.0)
    _, wait, _ = lower.reserve(st, Cost(1000, 0), 0.0)
    assert wait == pytest.approx(1.0)


def test_few_tokens_left_hold_the_bucket_until_enough_are_back() -> None:
    # known rate (1,000/s): hold until the missing 700 tokens are back
    policy = TokenPolicy({"input_tokens": 60_000}, horizon=0.3)
    limits = ServerLimits(input_tokens=Reading(remaining=300, reset=50.0))
    st, short = policy.observe(None, limits, Cost(1000, 0), 10.0)
    assert short and st.buckets["input_tokens"].hold_until == pytest.approx(10.7)
    # no rate known: hold until the server's reset
    headers_only = TokenPolicy({})
    st, short = headers_only.observe(None, limits, Cost(1000, 0), 10.0)
    assert short and st.buckets["input_tokens"].hold_until == 50.0
    st, wait, reserved = headers_only.reserve(st, Cost(1000, 0), 10.0)
    assert not reserved and wait > 0
    # enough left: nothing held
    _, short = headers_only.observe(
        None, ServerLimits(input_tokens=Reading(remaining=5000, reset=50.0)), Cost(1000, 0), 10.0
    )
    assert not short


def test_the_servers_request_limit_caps_the_rate_and_none_left_pauses() -> None:
    policy = RatePolicy(None, adaptive=True, tuning=RateTuning(start_rate=100.0))
    st, _, _ = policy.reserve(None, 0.0)
    st = policy.observe(st, Reading(limit=600, remaining=5, reset=1.0), 0.0)
    st, _, _ = policy.reserve(st, 0.01)
    assert st.rate == pytest.approx(10.0 * policy.tuning.headroom)  # paced a little under
    # none left and no limit known: nothing to go by but the reset
    st = policy.observe(st, Reading(remaining=0, reset=30.0), 1.0)
    _, wait, reserved = policy.reserve(st, 2.0)
    assert not reserved and 27.0 <= wait <= 28.0


def test_a_limit_the_server_states_ends_the_slow_start() -> None:
    """The slow start probes for a limit nobody has stated; once the server's headers
    state one, the rate starts from it (the whole grid spent its first 10 s at half its
    300 req/s climbing from 8 req/s). After a 429 the rate is the AIMD's again."""
    policy = RatePolicy(None, adaptive=True, tuning=RateTuning(start_rate=8.0))
    st, _, _ = policy.reserve(None, 0.0)
    st = policy.observe(st, Reading(limit=18_000, remaining=17_000, reset=1.0), 0.5)
    st, _, _ = policy.reserve(st, 0.51)
    paced = 300.0 * policy.tuning.headroom  # a little under the limit
    assert st.rate == pytest.approx(paced)
    st, _ = policy.rate_limited(st, 1.0, 1.0)
    cut = st.rate
    st = policy.observe(st, Reading(limit=18_000, remaining=17_000, reset=1.0), 2.0)
    assert st.rate == cut < paced


def test_none_left_waits_for_one_request_not_for_a_full_bucket() -> None:
    """Providers refill their buckets continuously and `reset` is when the bucket is
    full again: a client running at the limit reads `remaining: 0` often, and holding
    every call until the reset made the main job stop and go at 0.7 of the limit."""
    policy = RatePolicy(None, adaptive=True, tuning=RateTuning(start_rate=10.0))
    st, _, _ = policy.reserve(None, 0.0)
    st = policy.observe(st, Reading(limit=600, remaining=0, reset=1.0), 0.5)
    _, wait, reserved = policy.reserve(st, 0.5)
    assert reserved and wait == pytest.approx(0.1)  # one request refills in 1/10 s
    st = policy.observe(None, Reading(limit=600, remaining=0, reset=0.52), 0.5)
    assert st.pause_until == pytest.approx(0.52)  # the reset comes sooner still


def test_a_429_for_tokens_does_not_cut_the_request_rate() -> None:
    policy = RatePolicy(None, adaptive=True, tuning=RateTuning(start_rate=20.0))
    st, _, _ = policy.reserve(None, 0.0)
    st, cut = policy.rate_limited(st, 0.0, 1.0, cut=False)
    assert not cut and st.rate == 20.0
    st, cut = policy.rate_limited(st, 0.0, 1.0)
    assert cut and st.rate == pytest.approx(17.0)


def test_the_limiter_tells_a_token_429_from_a_request_429(tmp_path: Path) -> None:
    limiter = Limiter(None, None, state_dir=tmp_path, key="m", adaptive=True)
    cost = Cost(1000, 100)
    tokens_out = ProviderError(
        "429",
        status=429,
        retry_after=1.0,
        limits=ServerLimits(
            requests=Reading(limit=600, remaining=500, reset=None),
            input_tokens=Reading(limit=60_000, remaining=0, reset=None),
        ),
    )
    requests_out = ProviderError("429", status=429, retry_after=1.0)

    async def fail(exc: ProviderError) -> None:
        async def call() -> None:
            raise exc

        with pytest.raises(ProviderError):
            await limiter.call(call, cost)

    # what the limiter concludes from each (the rate it then keeps follows from the policy,
    # tested with its own clock in tests/test_retry_limits.py; read here, the wall clock
    # between two readings would move it)
    told: list[bool] = []
    real = limiter.on_rate_limited

    def seen(
        retry_after: float | None, *, tokens_short: bool = False, epoch: float | None = None
    ) -> None:
        told.append(tokens_short)
        real(retry_after, tokens_short=tokens_short, epoch=epoch)

    limiter.on_rate_limited = seen  # type: ignore[method-assign]
    asyncio.run(fail(tokens_out))
    asyncio.run(fail(requests_out))
    assert told == [True, False]


# --- the config keys --------------------------------------------------------------------


TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy")


@pytest.mark.parametrize(
    "key", ["input_tokens_per_minute", "output_tokens_per_minute", "tokens_per_minute"]
)
def test_token_limit_keys(key: str) -> None:
    raw: dict[str, Any] = yaml.safe_load((REPO / "config.yaml").read_text())
    raw["models"]["sonnet"][key] = 400_000
    cfg = validate_config(raw, TAXONOMY)
    limited = cfg.models["sonnet"]
    assert getattr(limited, key) == 400_000
    # a transport setting: the same answers, the same stored calls
    plain = limited.model_copy(update={key: None})
    assert limited.output_settings() == plain.output_settings()
    req = Request(messages=(ChatMessage("user", "hi"),))
    assert cache_key(limited.output_settings(), req) == cache_key(plain.output_settings(), req)
    raw["models"]["sonnet"][key] = 0
    with pytest.raises(ConfigError, match=f"models.sonnet.{key}"):
        validate_config(raw, TAXONOMY)


def test_the_estimate_is_four_characters_a_token_and_max_tokens() -> None:
    req = Request(messages=(ChatMessage("user", "x" * 4000),), system="y" * 400, max_tokens=900)
    assert estimated_cost(req) == Cost(1100, 900)


# --- whole runs against servers that enforce a token limit --------------------------------


def _server(provider: ProviderName, **kw: Any) -> AnthropicServer | OpenAIServer:
    """2,000 tokens/s (about 4 of the calls below a second), 2 s of them held: room for
    a starved event loop to catch up, none for a run that ignores the limit."""
    cls = AnthropicServer if provider == "anthropic" else OpenAIServer
    return cls(tokens_per_minute=120_000, token_burst=2.0, **kw)


def _run_calls(
    provider: ProviderName,
    srv: AnthropicServer | OpenAIServer,
    limiter: Limiter | None,
    monkeypatch: pytest.MonkeyPatch,
    *,
    calls: int = 16,
    concurrency: int = 8,
    **cfg: Any,
) -> int:
    """`calls` calls of ~500 input tokens; how many succeeded."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-loopback")
    url = srv.url if provider == "anthropic" else f"{srv.url}/v1"
    config = ModelConfig(provider=provider, model="m", base_url=url, max_tokens=50, **cfg)
    client = ModelClient("tok", config, limiter=limiter or limiter_for("tok", config, None))
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> bool:
        async with sem:
            try:
                await client.text([ChatMessage("user", f"{i} " + "w" * 2000)], stage="t")
            except ProviderError:
                return False
            return True

    async def many() -> int:
        try:
            return sum(await asyncio.gather(*(one(i) for i in range(calls))))
        finally:
            await client.aclose()

    return asyncio.run(many())


TOKEN_KEY = {"anthropic": "input_tokens_per_minute", "openai": "tokens_per_minute"}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_without_any_limit_the_token_limit_is_overrun(
    provider: ProviderName, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline the two tests below improve on: no configured limit, headers unread."""
    with _server(provider, limit_headers=False) as srv:
        _run_calls(provider, srv, None, monkeypatch)
    assert srv.statuses[429] >= 8, srv.statuses


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_configured_token_limit_holds(
    provider: ProviderName, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no headers: the config alone paces
    with _server(provider, limit_headers=False) as srv:
        done = _run_calls(provider, srv, None, monkeypatch, **{TOKEN_KEY[provider]: 120_000})
    assert done == 16
    assert srv.statuses[429] <= 1, srv.statuses


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_servers_headers_alone_keep_the_run_under_its_limit(
    provider: ProviderName, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with _server(provider, rate_limit=100) as srv:
        url = srv.url if provider == "anthropic" else f"{srv.url}/v1"
        config = ModelConfig(provider=provider, model="m", base_url=url)
        limiter = limiter_for("tok", config, tmp_path, adaptive=True)
        done = _run_calls(provider, srv, limiter, monkeypatch)
        first = srv.requests[0]
    assert done == 16
    assert srv.statuses[429] <= 2, srv.statuses
    assert first.path.endswith(("/messages", "/chat/completions"))


@pytest.mark.slow
def test_a_configured_input_limit_counts_what_the_prompt_cache_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Anthropic's input-token limit counts tokens written to the prompt cache (reads do
    not count). Each call here writes its own long system prompt: a reservation settled
    with `input_tokens` alone (which leaves the writes out) let the run overrun the
    limit."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-loopback")
    with _server("anthropic", limit_headers=False) as srv:
        config = ModelConfig(provider="anthropic", model="m", base_url=srv.url, max_tokens=50,
                             input_tokens_per_minute=120_000)  # fmt: skip
        client = ModelClient("tok", config, limiter=limiter_for("tok", config, None))
        sem = asyncio.Semaphore(8)

        async def one(i: int) -> None:
            async with sem:
                system = f"Instructions for call {i}. " + "Follow them closely. " * 230
                await client.text([ChatMessage("user", f"hello {i}")], stage="t", system=system)

        async def many() -> None:
            try:
                await asyncio.gather(*(one(i) for i in range(16)))
            finally:
                await client.aclose()

        asyncio.run(many())
        assert srv.cache_writes > 0  # each call wrote its prompt to the cache
    assert srv.statuses[429] <= 1, srv.statuses
