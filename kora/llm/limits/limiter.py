"""The limiter of one model: its request rate, token buckets and concurrency slots, held
for the whole run, and the one place where the limits and the retry layer meet.

Snakemake runs up to `--cores` jobs at once, each a separate process, possibly on
several cluster nodes sharing a filesystem; the state lives in files under `state_dir`
(`<model>.rate`, `<model>.tokens`, `<model>.slot<i>`) that every process of the run
shares. All times in them are wall-clock (`time.time()`), so nodes need synchronised
clocks (NTP), as Snakemake itself does. `state_dir=None` keeps the same limits within
the process only.

A call takes a concurrency slot, then its request slot, then its tokens; after the
answer its token reservation is corrected with the tokens the provider counted, and the
provider's rate-limit headers (`Response.limits`, `ProviderError.limits`) update the
shared state. A 429 slows the whole run down: it cuts the shared request rate, unless the
headers say a token bucket ran out, which then holds calls until enough tokens are back.

With `kora.llm.retry.set_testing(True)` the adaptive part (learning the rate from 429s,
and the token buckets the server's headers alone would set up) is off unless asked for
(`adaptive=True`); configured limits hold in tests too.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import re
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from kora.llm import retry
from kora.llm.base import ProviderError, Response
from kora.llm.headers import ServerLimits
from kora.llm.limits.rate import RatePolicy, RateState, RateTuning
from kora.llm.limits.slots import Slots
from kora.llm.limits.state import FileState, MemoryState, shared
from kora.llm.limits.tokens import Cost, TokenBucket, TokenPolicy, TokenState
from kora.llm.limits.turns import Turns, settled
from kora.llm.settings.config import ModelConfig

log = logging.getLogger("kora.llm")

T = TypeVar("T")


class Limiter:
    """Rate, token and concurrency limits for one model.

    `slot(cost)` is held around one provider call; `call(fn, cost)` runs one attempt in
    a slot and tells the limiter what came back.
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        max_concurrency: int | None = None,
        *,
        state_dir: Path | None = None,
        key: str = "model",
        adaptive: bool | None = None,
        tuning: RateTuning | None = None,
        tokens_per_minute: Mapping[TokenBucket, float | None] | None = None,
    ) -> None:
        self.key = key
        self.adaptive = (not retry.is_testing()) if adaptive is None else adaptive
        tuning = tuning or RateTuning()
        self.policy = RatePolicy(requests_per_minute, self.adaptive, tuning)
        self.token_policy = TokenPolicy(
            tokens_per_minute or {},
            horizon=tuning.horizon,
            idle_reset=tuning.idle_reset,
            max_hold=tuning.max_hold,
        )
        scope = _state_scope(state_dir) if state_dir is not None else ""
        # the calls of this process that wait for the model's next request slot, in turn
        # (`Turns`); one queue per event loop, as its futures belong to one
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Turns] = shared(
            ("turns", scope, key), weakref.WeakKeyDictionary
        )
        self._rate: MemoryState[RateState] | FileState[RateState] | None = None
        if requests_per_minute is not None or self.adaptive:
            if state_dir is None:
                self._rate = shared(("rate", scope, key, repr(self.policy.ceiling)), MemoryState)
            else:
                path = state_dir / f"{key}.rate"
                self._rate = shared(("rate", scope, key), lambda: FileState(path, RateState.unpack))
        # token buckets: configured ones, or (adaptive) any the server's headers state
        self._tokens: MemoryState[TokenState] | FileState[TokenState] | None = None
        if self.token_policy.configured or self.adaptive:
            if state_dir is None:
                limits = repr(sorted(self.token_policy.configured.items()))
                self._tokens = shared(("tokens", scope, key, limits), MemoryState)
            else:
                tpath = state_dir / f"{key}.tokens"
                self._tokens = shared(
                    ("tokens", scope, key), lambda: FileState(tpath, TokenState.unpack)
                )
        self._slots: Slots | None = None
        if max_concurrency:
            n = max_concurrency
            paths = None if state_dir is None else [state_dir / f"{key}.slot{i}" for i in range(n)]
            self._slots = shared(("slots", scope, key, str(n)), lambda: Slots(n, paths))

    @asynccontextmanager
    async def slot(
        self, cost: Cost | None = None, *, traced: bool = False
    ) -> AsyncIterator[float | None]:
        """Held around one request; gives the rate's epoch its slot was granted under
        (None: no rate kept), which a 429 of the request is told with. `traced`: the
        request's transport says when it writes it (`kora.llm.limits.wrote`)."""
        idx = await self._slots.acquire() if self._slots is not None else None
        try:
            epoch = await self._wait_for_rate(traced) if self._rate is not None else None
            # tokens last: a call takes them with the latest the server has said (a call
            # that took them before its request slot came could not be paced by them)
            if self._tokens is not None and cost is not None:
                await self._wait_for_tokens(cost)
            yield epoch
        finally:
            settled()
            if idx is not None and self._slots is not None:
                self._slots.release(idx)

    async def _wait_for_tokens(self, cost: Cost) -> None:
        assert self._tokens is not None
        policy = self.token_policy
        while True:
            now = time.time()

            def take(
                st: TokenState | None, now: float = now
            ) -> tuple[TokenState, tuple[float, bool]]:
                new, wait, reserved = policy.reserve(st, cost, now)
                return new, (wait, reserved)

            wait, reserved = self._tokens.update(take)
            if wait > 0:
                await asyncio.sleep(wait)
            if reserved:
                return

    async def _wait_for_rate(self, traced: bool) -> float:
        """Wait for a request slot; the rate's epoch (its count of cuts) it was granted
        under."""
        assert self._rate is not None
        policy, state, turns = self.policy, self._rate, self._queue()
        missed = 0
        while True:
            wait, epoch, asked = await turns.take(policy, state)
            if wait > 0:
                await asyncio.sleep(wait)
            # A call that woke late (a busy event loop, a starved CPU), or was given a slot
            # that had already passed unused (`RatePolicy.reserve`'s catch-up), still uses
            # it within `catch_up` seconds if no one-second window would then hold more
            # than the rate (`Turns.room`): the server saw no request in it. Were it to
            # take a new one, a loop busy for a second (iterations of 30-50 ms) would
            # waste every slot of it: the whole grid's requests in flight fell from ~400
            # to 1-33 so, a thousand calls waiting. Sent whatever the window, the late
            # calls' bursts had 6.4 % of the requests refused, and the targets' servers
            # of a leaderboard's run some. A call on time goes unless requests let go
            # before it and written late fill the window (kora.llm.limits.turns).
            while True:
                woke = time.time()
                late = woke - (asked + wait)
                if late <= policy.late_tolerance:
                    go = turns.room(woke, late=False)
                    break
                go = (late <= policy.tuning.catch_up or missed >= 5) and turns.room(woke)
                pause = turns.spread(woke)
                if go or not pause or late + pause > policy.tuning.catch_up:
                    break
                await asyncio.sleep(pause)  # the burst's next turn, its slot kept
            if go:
                turns.let_go(woke, traced=traced)
                return epoch
            missed += 1

    def _queue(self) -> Turns:
        loop = asyncio.get_running_loop()
        turns = self._turns.get(loop)
        if turns is None:
            turns = self._turns[loop] = Turns()
        return turns

    def answered(self, cost: Cost | None, used: Cost | None, limits: ServerLimits | None) -> bool:
        """Settle a call's token reservation with what it `used` (None: unknown, the
        reservation stands) and take in the server's headers; True when they say a token
        bucket had too few tokens left for a call like this one."""
        now = time.time()
        short = False
        told = used is not None or limits is not None
        if self._tokens is not None and cost is not None and told:
            policy = self.token_policy

            def update(st: TokenState | None) -> tuple[TokenState, bool]:
                if used is not None:
                    st = policy.settle(st, cost, used, now)
                if limits is None:
                    return st or TokenState(last_seen=now), False
                return policy.observe(st, limits, cost, now)

            short = self._tokens.update(update)
        requests = limits.requests if limits is not None else None
        if self._rate is not None and requests is not None:
            rate_policy = self.policy
            self._rate.update(lambda st: (rate_policy.observe(st, requests, now), None))
        return short

    def on_rate_limited(
        self, retry_after: float | None, *, tokens_short: bool = False, epoch: float | None = None
    ) -> None:
        """A 429: cut the shared request rate, unless a token bucket is what ran out or
        a cut since the call's slot (`epoch`) has answered it."""
        if not self.adaptive or self._rate is None:
            return
        now = time.time()
        policy = self.policy

        def refused(st: RateState | None) -> tuple[RateState, tuple[float, bool]]:
            new, cut = policy.rate_limited(st, now, retry_after, cut=not tokens_short, epoch=epoch)
            return new, (new.rate, cut)

        rate, cut = self._rate.update(refused)
        if cut:
            log.info("%s: rate limited (429); pacing at %.1f requests/min", self.key, rate * 60)

    async def call(
        self, fn: Callable[[], Awaitable[T]], cost: Cost | None = None, *, traced: bool = False
    ) -> T:
        """`fn()` in a slot of this limiter (`traced`: as `slot`), which learns from how it
        ends: the tokens an answer used and the server's headers, or a refusal's (a 429)."""
        async with self.slot(cost, traced=traced) as epoch:
            try:
                result = await fn()
            except ProviderError as exc:
                # a refused call used no tokens; any other failure keeps its reservation
                used = Cost() if exc.status == 429 else None
                short = self.answered(cost, used, exc.limits)
                if exc.status == 429:
                    self.on_rate_limited(exc.retry_after, tokens_short=short, epoch=epoch)
                raise
        if isinstance(result, Response):
            counted = result.limit_input_tokens
            if counted is None:
                counted = result.input_tokens
            # some servers count no tokens: keep the estimate
            self.answered(
                cost, Cost(counted, result.output_tokens) if counted else None, result.limits
            )
        return result


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def limiter_key(name: str, config: ModelConfig) -> str:
    """File stem for a model's shared state: its config name plus the endpoint it calls."""
    ident = f"{config.provider}|{config.model}|{config.base_url}"
    digest = hashlib.sha256(ident.encode()).hexdigest()[:10]
    return f"{_UNSAFE.sub('_', name)[:60]}-{digest}"


@functools.cache
def _state_scope(state_dir: Path) -> str:
    """The limits' folder made and named by its real path, once a process: a run's broker
    makes a limiter for every job's clients, and each walk of the path stalled its event
    loop (3 % of the stalled samples of a whole grid, bench/README.md)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    return str(state_dir.resolve())


def limiter_for(
    name: str, config: ModelConfig, state_dir: Path | None, *, adaptive: bool | None = None
) -> Limiter:
    """The limiter of a configured model; an offline `mock` model is limited only by what
    its config sets (no adaptive pacing: there is no service to protect)."""
    if adaptive is None and config.kind.offline:
        adaptive = False
    return Limiter(
        config.requests_per_minute,
        config.max_concurrency,
        state_dir=state_dir,
        key=limiter_key(name, config),
        adaptive=adaptive,
        tokens_per_minute={
            "input_tokens": config.input_tokens_per_minute,
            "output_tokens": config.output_tokens_per_minute,
            "tokens": config.tokens_per_minute,
        },
    )
