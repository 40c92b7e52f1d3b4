"""Rate and concurrency limits for a model, held for the whole run.

Snakemake runs up to `--cores` jobs at once, each a separate process, possibly on several
cluster nodes sharing a filesystem. A limit that each process kept for itself would be
multiplied by the number of jobs, so the limiter keeps its state in small files under
`state_dir`, one set per model, and every process of the run reads and updates them:

- **Rate** (`requests_per_minute`): a shared next-slot time (GCRA without burst credit)
  in `<model>.rate`, read and advanced under `fcntl.flock`. A call reserves the next
  slot, then sleeps until it. A call reserves at most `horizon` ahead (one that would
  wait longer comes back later, so a change of rate takes effect at once), and a call
  that wakes late for its slot (busy event loop, starved CPU) takes a new one rather
  than going out together with the next.
- **Concurrency** (`max_concurrency`): N lock files `<model>.slot<i>`; a call holds one
  with a non-blocking `flock` for as long as it is in flight. A process with calls
  waiting polls for a free file (from 2 ms, backing off to 50 ms) and hands its own freed
  slots straight to its next waiting call. A killed process's locks vanish with it.
- **Adaptive back-off on 429** (AIMD on the shared rate): without a configured limit the
  rate starts at `start_rate` and doubles every second while calls queue behind it
  (slow start). A 429 multiplies it by `decrease`, or by the share of calls accepted
  since the previous cut when that is lower, so a deep overshoot is undone in one step;
  the 429s of calls sent before a cut took effect count once (`hold`). The rate then
  grows back by `growth` per second while calls queue, up to the configured limit if
  there is one (under a configured limit a 429 is mostly timing jitter: the cut is
  milder, `decrease_configured`). A Retry-After of `long_pause` seconds or more pauses
  every process of the run until then; a shorter one is honoured by the retried call
  itself (`kora.llm.retry`).

All times in the shared files are wall-clock (`time.time()`), so nodes need synchronised
clocks (NTP), as Snakemake itself does. `state_dir=None` keeps the same limits within the
process only. The work per call is a lock, a 100-byte read and a write: tens of us.

With `kora.llm.retry.set_testing(True)` the adaptive part is off unless asked for
(`adaptive=True`); configured limits hold in tests too.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import math
import os
import random
import re
import struct
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from kora.config import ModelConfig
from kora.llm import retry
from kora.llm.base import ProviderError

log = logging.getLogger("kora.llm")

T = TypeVar("T")

MAX_RATE = 1e6  # req/s; "no limit" in practice


@dataclass(frozen=True)
class RateTuning:
    start_rate: float = 8.0  # req/s a model without a configured limit starts from
    slow_start_growth: float = 1.0  # +100 %/s while calls queue, until the first 429
    growth: float = 0.05  # +5 %/s while calls queue, after a 429
    decrease: float = 0.85  # on a 429 the rate is multiplied by this, or by the share of
    # calls accepted since the last cut if lower (a deep overshoot is undone at once) ...
    hold: float = 0.3  # ... at most once per (slots already given out + hold) seconds
    decrease_configured: float = 0.95  # milder under a configured limit: a 429 there is
    # mostly timing jitter at the limit (or another user of the same key)
    min_rate: float = 1 / 60  # never below one call a minute
    horizon: float = 0.3  # seconds: a call reserves a slot at most this far ahead
    long_pause: float = 5.0  # a Retry-After this long pauses every process
    idle_reset: float = 600.0  # seconds without calls after which the learnt rate is dropped


@dataclass
class RateState:
    """The shared part of a rate limit (all times wall-clock seconds)."""

    tat: float = 0.0  # next free slot
    rate: float = MAX_RATE  # current allowed rate, req/s
    pause_until: float = 0.0
    hold_until: float = 0.0  # no growth and no further cut before this
    last_growth: float = 0.0
    last_seen: float = 0.0
    slow_start: float = 1.0  # 1.0 until the first 429
    cuts: float = 0.0
    granted: float = 0.0  # slots given out since the last cut
    refused: float = 0.0  # 429s since the last cut

    _FORMAT = struct.Struct("<d10d")  # version, fields
    _VERSION = 2.0

    def pack(self) -> bytes:
        return self._FORMAT.pack(
            self._VERSION,
            self.tat,
            self.rate,
            self.pause_until,
            self.hold_until,
            self.last_growth,
            self.last_seen,
            self.slow_start,
            self.cuts,
            self.granted,
            self.refused,
        )

    @classmethod
    def unpack(cls, raw: bytes) -> RateState | None:
        if len(raw) < cls._FORMAT.size:
            return None
        version, *fields = cls._FORMAT.unpack(raw[: cls._FORMAT.size])
        if version != cls._VERSION or not all(math.isfinite(f) for f in fields):
            return None
        if fields[1] <= 0:
            return None
        return cls(*fields)


class RatePolicy:
    """How one model's rate is kept: a ceiling (configured limit) and whether to adapt."""

    def __init__(self, requests_per_minute: float | None, adaptive: bool, tuning: RateTuning):
        self.ceiling = requests_per_minute / 60.0 if requests_per_minute else MAX_RATE
        self.configured = requests_per_minute is not None
        # how late a call may be for its slot before it takes a new one
        self.late_tolerance = max(0.01, 0.5 / self.ceiling)
        self.adaptive = adaptive
        self.tuning = tuning

    def fresh(self, now: float) -> RateState:
        if self.configured or not self.adaptive:
            return RateState(rate=self.ceiling, last_growth=now, last_seen=now, slow_start=0.0)
        return RateState(rate=self.tuning.start_rate, last_growth=now, last_seen=now)

    def reserve(self, st: RateState | None, now: float) -> tuple[RateState, float, bool]:
        """Take the next slot: (new state, seconds to wait, reserved?).

        Not reserved means the next slot is more than `horizon` away: wait, then ask again.
        """
        t = self.tuning
        if st is None or now - st.last_seen > t.idle_reset or now < st.last_seen - 3600:
            st = self.fresh(now)
        st.last_seen = now
        if not self.adaptive or st.rate > self.ceiling:
            st.rate = self.ceiling
        start = max(now, st.tat, st.pause_until)
        wait = start - now
        if wait > t.horizon:
            return st, wait - t.horizon * random.uniform(0.3, 0.9), False
        if self.adaptive and st.rate < self.ceiling and wait > 0 and now >= st.hold_until:
            # calls are queueing behind the limiter: probe upwards
            g = t.slow_start_growth if st.slow_start else t.growth
            dt = min(max(0.0, now - st.last_growth), 10.0)
            st.rate = min(self.ceiling, st.rate * (1.0 + g) ** dt)
        st.last_growth = now
        st.tat = start + (1.0 / st.rate if st.rate < MAX_RATE else 0.0)
        st.granted += 1
        return st, wait, True

    def rate_limited(
        self, st: RateState | None, now: float, retry_after: float | None
    ) -> tuple[RateState, bool]:
        """A 429 came back: cut the rate (once per hold) and honour a long Retry-After."""
        t = self.tuning
        if st is None:
            st = self.fresh(now)
        cut = False
        st.refused += 1
        if now >= st.hold_until:
            accepted = 1.0 - st.refused / st.granted if st.granted >= 8 else 1.0
            decrease = t.decrease_configured if self.configured else t.decrease
            factor = min(decrease, max(0.3, accepted))
            st.rate = max(t.min_rate, min(st.rate, self.ceiling) * factor)
            st.granted = st.refused = 0.0
            st.slow_start = 0.0
            st.hold_until = max(now, st.tat) + t.hold
            st.last_growth = st.hold_until
            st.cuts += 1
            cut = True
        if retry_after is not None and retry_after >= t.long_pause:
            st.pause_until = max(st.pause_until, now + min(retry_after, 600.0))
        return st, cut


# --- where the state lives ------------------------------------------------------------


class _MemoryState:
    def __init__(self) -> None:
        self.state: RateState | None = None
        self.lock = threading.Lock()

    def update(self, fn: Callable[[RateState | None], tuple[RateState, T]]) -> T:
        with self.lock:
            self.state, out = fn(self.state)
            return out


class _FileState:
    """A RateState in a file, read and written under an exclusive flock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pid = -1
        self.fd = -1

    def _open(self) -> int:
        if self.pid != os.getpid():  # never share an open file (and its locks) across fork
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self.pid = os.getpid()
        return self.fd

    def update(self, fn: Callable[[RateState | None], tuple[RateState, T]]) -> T:
        fd = self._open()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            st, out = fn(RateState.unpack(os.pread(fd, 128, 0)))
            os.pwrite(fd, st.pack(), 0)
            return out
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


class _Slots:
    """`n` concurrency slots: lock files shared by every process, or in-process only."""

    def __init__(self, n: int, paths: list[Path] | None) -> None:
        self.n = n
        self.paths = paths
        self.fds: list[int] = []
        self.pid = -1
        self.held: set[int] = set()
        self.waiters: deque[asyncio.Future[int]] = deque()
        self.poller: asyncio.Task[None] | None = None

    def _check_fork(self) -> None:
        if self.paths is not None and self.pid != os.getpid():
            self.fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o644) for p in self.paths]
            self.pid = os.getpid()
            self.held.clear()
            self.waiters.clear()
            self.poller = None

    def _try(self) -> int | None:
        if len(self.held) >= self.n:
            return None
        if self.paths is None:
            i = next(i for i in range(self.n) if i not in self.held)
            self.held.add(i)
            return i
        first = random.randrange(self.n)
        for k in range(self.n):
            i = (first + k) % self.n
            if i in self.held:
                continue
            try:
                fcntl.flock(self.fds[i], fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            self.held.add(i)
            return i
        return None

    def _hand_over(self, i: int) -> bool:
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(i)
                return True
        return False

    async def acquire(self) -> int:
        self._check_fork()
        if not self.waiters:
            i = self._try()
            if i is not None:
                return i
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        if self.paths is not None and (self.poller is None or self.poller.done()):
            self.poller = asyncio.create_task(self._poll())
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(fut.result())
            raise
        finally:
            with contextlib.suppress(ValueError):
                self.waiters.remove(fut)

    def release(self, i: int) -> None:
        if self._hand_over(i):
            return
        self.held.discard(i)
        if self.paths is not None and self.pid == os.getpid():
            fcntl.flock(self.fds[i], fcntl.LOCK_UN)

    async def _poll(self) -> None:
        """Wait for another process to free a slot, on behalf of this process's waiters."""
        delay = 0.002
        while any(not f.done() for f in self.waiters):
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            i = self._try()
            if i is None:
                delay = min(delay * 2, 0.05)
                continue
            delay = 0.002
            if not self._hand_over(i):
                self.release(i)


_registry: dict[tuple[str, ...], object] = {}
_registry_lock = threading.Lock()


def _shared(key: tuple[str, ...], make: Callable[[], T]) -> T:
    with _registry_lock:
        obj = _registry.get(key)
        if obj is None:
            obj = _registry[key] = make()
        return obj  # type: ignore[return-value]


def reset_limiters() -> None:
    """Forget the in-process limiter state (tests)."""
    with _registry_lock:
        _registry.clear()


# --- the limiter ----------------------------------------------------------------------


class Limiter:
    """Rate and concurrency limits for one model.

    `slot()` is held around one provider call; `on_rate_limited(retry_after)` is told of
    each 429 and `on_success()` of each answer.
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
    ) -> None:
        self.key = key
        self.adaptive = (not retry.is_testing()) if adaptive is None else adaptive
        self.policy = RatePolicy(requests_per_minute, self.adaptive, tuning or RateTuning())
        scope = str(state_dir.resolve()) if state_dir is not None else ""
        if state_dir is not None:
            state_dir.mkdir(parents=True, exist_ok=True)
        self._rate: _MemoryState | _FileState | None = None
        if requests_per_minute is not None or self.adaptive:
            if state_dir is None:
                self._rate = _shared(("rate", scope, key, repr(self.policy.ceiling)), _MemoryState)
            else:
                path = state_dir / f"{key}.rate"
                self._rate = _shared(("rate", scope, key), lambda: _FileState(path))
        self._slots: _Slots | None = None
        if max_concurrency:
            n = max_concurrency
            paths = None if state_dir is None else [state_dir / f"{key}.slot{i}" for i in range(n)]
            self._slots = _shared(("slots", scope, key, str(n)), lambda: _Slots(n, paths))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        idx = await self._slots.acquire() if self._slots is not None else None
        try:
            if self._rate is not None:
                await self._wait_for_rate()
            yield
        finally:
            if idx is not None and self._slots is not None:
                self._slots.release(idx)

    async def _wait_for_rate(self) -> None:
        assert self._rate is not None
        policy = self.policy
        missed = 0
        while True:
            now = time.time()
            wait, reserved = self._rate.update(partial(_reserve, policy, now=now))
            if wait > 0:
                await asyncio.sleep(wait)
            if not reserved:
                continue
            # A slot is used on time or not at all: calls that woke late (a busy event
            # loop, a starved CPU) would otherwise all go out at once.
            late = time.time() - (now + wait)
            if late <= policy.late_tolerance or missed >= 5:
                return
            missed += 1

    def on_rate_limited(self, retry_after: float | None) -> None:
        if not self.adaptive or self._rate is None:
            return
        now = time.time()
        policy = self.policy
        rate, cut = self._rate.update(lambda st: _rate_limited(policy, st, now, retry_after))
        if cut:
            log.info("%s: rate limited (429); pacing at %.1f requests/min", self.key, rate * 60)

    def on_success(self) -> None:
        pass

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """`fn()` in a slot of this limiter; a 429 it raises slows the whole run down."""
        async with self.slot():
            try:
                result = await fn()
            except ProviderError as exc:
                if exc.status == 429:
                    self.on_rate_limited(exc.retry_after)
                raise
        self.on_success()
        return result

    def current_rate(self) -> float | None:
        """The shared allowed rate in requests per second (None: no rate limit kept)."""
        if self._rate is None:
            return None
        policy = self.policy
        now = time.time()

        def peek(st: RateState | None) -> tuple[RateState, float]:
            st = st or policy.fresh(now)
            return st, st.rate

        return self._rate.update(peek)


def _reserve(
    policy: RatePolicy, st: RateState | None, now: float
) -> tuple[RateState, tuple[float, bool]]:
    new, wait, reserved = policy.reserve(st, now)
    return new, (wait, reserved)


def _rate_limited(
    policy: RatePolicy, st: RateState | None, now: float, retry_after: float | None
) -> tuple[RateState, tuple[float, bool]]:
    new, cut = policy.rate_limited(st, now, retry_after)
    return new, (new.rate, cut)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def limiter_key(name: str, config: ModelConfig) -> str:
    """File stem for a model's shared state: its config name plus the endpoint it calls."""
    ident = f"{config.provider}|{config.model}|{config.base_url}"
    digest = hashlib.sha256(ident.encode()).hexdigest()[:10]
    return f"{_UNSAFE.sub('_', name)[:60]}-{digest}"


def limiter_for(
    name: str, config: ModelConfig, state_dir: Path | None, *, adaptive: bool | None = None
) -> Limiter:
    """The limiter of a configured model; an offline `mock` model is limited only by what
    its config sets (no adaptive pacing: there is no service to protect)."""
    if adaptive is None and config.provider == "mock":
        adaptive = False
    return Limiter(
        config.requests_per_minute,
        config.max_concurrency,
        state_dir=state_dir,
        key=limiter_key(name, config),
        adaptive=adaptive,
    )
