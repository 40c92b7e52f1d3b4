"""What one call may take: time, from connecting to the last byte of the answer, and
size, in bytes of the answer.

HTTP clients bound each read (a server that sends a byte a second never trips them), so
every request a run makes is also held to a deadline around the whole of it: a model's
call (`kora.llm.client`), each request of a chat service's session (`kora.llm.providers.service`)
and each look at a batch (`kora.llm.providers.batch`). Past it the attempt fails as a timeout
does: it is retried, then recorded as a failed call.

An answer larger than the model's `max_reply_bytes` is a failed attempt too, found while
its body is read (`read_body`), never after reading it all.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager

from kora.llm.base import ProviderError

DEFAULT_TIMEOUT = 120.0  # seconds a call may take when a model's config sets no timeout
# The largest answer a model's config accepts unless it sets `max_reply_bytes`: 1 MiB,
# some 60 times the longest answer the benchmark asks for (4,000 tokens, ~16 KB) and
# above the output limit of any current model (128k tokens, ~0.5 MB), yet small enough
# that an 8-turn transcript of replies at the limit stays under DuckDB's default 16 MB
# per record and within what a judge model can be sent.
DEFAULT_MAX_REPLY_BYTES = 1 << 20


def deadline_message(label: str, seconds: float) -> str:
    return f"{label}: no complete answer within the {seconds:g} s deadline (timeout)"


def timed_out(label: str, seconds: float) -> ProviderError:
    """A call past its deadline: retryable, like any timeout."""
    return ProviderError(deadline_message(label, seconds), status=None)


@asynccontextmanager
async def deadline(seconds: float, label: str) -> AsyncIterator[None]:
    """The block must end within `seconds`, or it is cancelled and a retryable
    ProviderError naming the deadline is raised."""
    limit = asyncio.timeout(seconds)
    try:
        async with limit:
            yield
    except TimeoutError:
        if limit.expired():
            raise timed_out(label, seconds) from None
        raise


def too_large(label: str, size: int, limit: int, *, exact: bool = True) -> ProviderError:
    """An answer over the size limit: a failed attempt, retried as a malformed one is."""
    what = f"{size:,} bytes" if exact else f"more than {size:,} bytes"
    return ProviderError(
        f"{label}: the answer is {what}, over the limit of {limit:,} bytes (max_reply_bytes)",
        retryable=True,
    )


async def read_body(
    chunks: AsyncIterable[bytes], limit: int | None, label: str, declared: str | None = None
) -> bytes:
    """A response body, read chunk by chunk and given up as soon as it passes `limit`
    bytes (None: no limit); `declared` is its Content-Length, trusted to refuse early."""
    if limit is not None and declared is not None and declared.strip().isdigit():
        size = int(declared)
        if size > limit:
            raise too_large(label, size, limit)
    parts: list[bytes] = []
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if limit is not None and total > limit:
            raise too_large(label, limit, limit, exact=False)
        parts.append(chunk)
    return b"".join(parts)


def check_size(label: str, text: str, limit: int) -> None:
    """An answer already read (a batch's, the mock's) over the limit fails the same way."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise too_large(label, size, limit)
