"""One retry layer for every provider: exponential back-off with jitter, honouring
Retry-After, bounded in attempts and in total time.

What is worth retrying is a `ProviderError` that says so (`kora.llm.base.is_retryable`);
by default that is `is_transient`: a 408/429/5xx (529 included) status, a timeout or a
dropped connection. Any other 4xx fails at once, with a message naming the model and the
status. Every provider call is retried here, each attempt taking its own slot of its
model's limiter; the client runs each attempt itself (`attempts`, in kora.llm.client).

`set_testing(True)` (or `KORA_RETRY_TESTING=1` in the environment) turns the waiting off,
so the tests exercise every retry path in milliseconds; the adaptive 429 back-off of
`kora.llm.limits` follows the same switch.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from kora.llm.headers import parse_number

T = TypeVar("T")

log = logging.getLogger("kora.llm")

_testing = os.environ.get("KORA_RETRY_TESTING") == "1"


def set_testing(on: bool) -> None:
    """No back-off waits while on (the retries themselves still happen)."""
    global _testing
    _testing = on


def is_testing() -> bool:
    return _testing


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 8  # calls in all, the first one included
    initial: float = 1.0  # first back-off, seconds
    maximum: float = 60.0  # longest single wait (also caps a Retry-After)
    total: float = 600.0  # give up when the next wait would pass this since the first call
    # no connection at all (refused, unknown host): a wrong base_url or a service that is
    # down; give up after this many seconds rather than `total`
    unreachable_total: float = 20.0
    jitter: float = 0.2  # +-20 % on exponential waits; up to +20 % on a Retry-After


def is_transient(status: int | None) -> bool:
    """A failure worth retrying: no HTTP status (timeout, dropped connection), a request
    timeout (408), rate limiting (429) or a server-side error (5xx, Anthropic's 529)."""
    return status is None or status in (408, 429) or status >= 500


def backoff(policy: RetryPolicy, attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before attempt `attempt + 1` (attempt counts from 1).

    A server's Retry-After is a floor (a little jitter on top keeps many waiting calls
    from coming back in the same millisecond); otherwise the wait doubles from
    `policy.initial` up to `policy.maximum`, +-jitter.
    """
    if retry_after is not None and retry_after >= 0:
        return min(retry_after * (1 + random.uniform(0, policy.jitter)), policy.maximum)
    base = min(policy.initial * 2.0 ** (attempt - 1), policy.maximum)
    return base * (1 + random.uniform(-policy.jitter, policy.jitter))


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms`, or `retry-after` as seconds or an HTTP date."""
    ms = parse_number(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    if (seconds := parse_number(value)) is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


class Attempt:
    """One attempt of a call, as `attempts` gives it: `async with attempt:` around the
    call; a failure worth another attempt is waited out on leaving it and not raised."""

    def __init__(self, run: _Run, number: int) -> None:
        self._run = run
        self.number = number

    async def __aenter__(self) -> Attempt:
        return self

    async def __aexit__(self, kind: object, exc: BaseException | None, tb: object) -> bool:
        if exc is None:
            self._run.done = True
            return False
        if not isinstance(exc, Exception):
            return False  # a cancellation, Ctrl-C: never a reason to try again
        return await self._run.retry_after(exc, self.number)


@dataclass
class _Run:
    policy: RetryPolicy
    should_retry: Callable[[BaseException], bool]
    on_retry: Callable[[BaseException, int, float], None] | None
    on_resume: Callable[[], None] | None
    start: float
    done: bool = False

    async def retry_after(self, exc: Exception, attempt: int) -> bool:
        """Whether to try again after `exc` (having waited its back-off), or let it out."""
        policy = self.policy
        if attempt >= policy.attempts or not self.should_retry(exc):
            return False
        ra = getattr(exc, "retry_after", None)
        wait = backoff(policy, attempt, float(ra) if isinstance(ra, int | float) else None)
        budget = policy.unreachable_total if getattr(exc, "unreachable", False) else policy.total
        if time.monotonic() - self.start + wait > budget:
            return False
        log.debug("attempt %d failed (%s); retrying in %.1f s", attempt, exc, wait)
        if self.on_retry is not None:
            self.on_retry(exc, attempt, wait)
        try:
            if not _testing:
                await asyncio.sleep(wait)
        finally:
            if self.on_resume is not None:
                self.on_resume()
        return True


def attempts(
    *,
    should_retry: Callable[[BaseException], bool],
    policy: RetryPolicy = RetryPolicy(),
    on_retry: Callable[[BaseException, int, float], None] | None = None,
    on_resume: Callable[[], None] | None = None,
) -> Attempts:
    """The attempts of one call, until one succeeds, one fails with an error
    `should_retry` rejects (raised as it is), or the attempts or the time budget run out
    (the last error raised as it is):

        async for attempt in attempts(should_retry=...):
            async with attempt:
                answer = await call()

    The caller's code runs each attempt itself (hynek/stamina's retry_context): the retry
    layer is no frame between a call and the provider it reaches."""
    return Attempts(_Run(policy, should_retry, on_retry, on_resume, time.monotonic()))


@dataclass
class Attempts:
    """An async iterator of a call's attempts (`attempts`): a plain object, not an async
    generator, so a caller that returns from inside the loop leaves nothing to close."""

    run: _Run
    number: int = 0

    def __aiter__(self) -> Attempts:
        return self

    async def __anext__(self) -> Attempt:
        if self.run.done:
            raise StopAsyncIteration
        self.number += 1
        return Attempt(self.run, self.number)
