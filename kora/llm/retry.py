"""One retry layer for every provider: exponential back-off with jitter, honouring
Retry-After, bounded in attempts and in total time.

What is worth retrying is a `ProviderError` that says so (`kora.llm.base.is_retryable`);
by default that is `is_transient`: a 408/429/5xx (529 included) status, a timeout or a
dropped connection. Any other 4xx fails at once, with a message naming the model and the
status. Every provider call is retried here, each attempt taking its own slot of its
model's limiter (kora.llm.client: `retrying(lambda: limiter.call(...))`).

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
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

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


_NUMBER = re.compile(r"^\s*\d+(\.\d+)?\s*$")


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms`, or `retry-after` as seconds or an HTTP date."""
    ms = headers.get("retry-after-ms")
    if ms is not None and _NUMBER.match(ms):
        return float(ms) / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    if _NUMBER.match(value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def retrying(
    fn: Callable[[], Awaitable[T]],
    *,
    should_retry: Callable[[BaseException], bool],
    policy: RetryPolicy = RetryPolicy(),
    on_retry: Callable[[BaseException, int, float], None] | None = None,
    on_resume: Callable[[], None] | None = None,
) -> T:
    """Call `fn` until it succeeds, it fails with an error `should_retry` rejects, or the
    attempts or the time budget run out; the last error is raised as it is."""
    start = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await fn()
        except Exception as exc:
            if attempt >= policy.attempts or not should_retry(exc):
                raise
            ra = getattr(exc, "retry_after", None)
            wait = backoff(policy, attempt, float(ra) if isinstance(ra, int | float) else None)
            budget = (
                policy.unreachable_total if getattr(exc, "unreachable", False) else policy.total
            )
            if time.monotonic() - start + wait > budget:
                raise
            log.debug("attempt %d failed (%s); retrying in %.1f s", attempt, exc, wait)
            if on_retry is not None:
                on_retry(exc, attempt, wait)
            try:
                if not _testing:
                    await asyncio.sleep(wait)
            finally:
                if on_resume is not None:
                    on_resume()
