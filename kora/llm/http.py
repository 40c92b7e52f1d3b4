"""One POST over httpx, its transport failures turned into retryable ProviderErrors."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import httpx

from kora.llm.base import ProviderError
from kora.llm.retry import redact


async def post(
    client: httpx.AsyncClient,
    url: str,
    *,
    label: str,
    timeout: float,
    key: str | None,
    **kwargs: Any,
) -> httpx.Response:
    """The response, whatever its status; a timeout or a dropped connection raises a
    ProviderError without status (retryable) that names the model, never the key."""
    try:
        return await client.post(url, **kwargs)
    except httpx.TimeoutException:
        raise ProviderError(f"{label}: no answer within {timeout:g} s", status=None) from None
    except httpx.TransportError as exc:
        raise ProviderError(
            f"{label}: connection failed ({type(exc).__name__}: {redact(str(exc), key)[:200]})",
            status=None,
        ) from None


def read_key(env: str, label: str, *, required: bool) -> str | None:
    """The API key from `env`; a required one that is unset is a clear, final error."""
    key = os.environ.get(env) or None
    if key is None and required:
        raise ProviderError(f"{label}: environment variable {env} is not set", retryable=False)
    return key


def new_client(timeout: float, key: str | None, **headers: str) -> httpx.AsyncClient:
    """An httpx client for many concurrent calls (a client belongs to one event loop)."""
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.AsyncClient(
        headers=headers,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 30.0)),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
    )


C = TypeVar("C")


class LoopBound(Generic[C]):
    """A provider's client, made anew for each event loop: a client's connections belong
    to the loop that opened them, and each job (or test) may run several loops in turn."""

    def __init__(self, make: Callable[[], C], close: Callable[[C], Awaitable[None]]) -> None:
        self._make = make
        self._close = close
        self._client: C | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> C:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self._make()
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(RuntimeError):  # its event loop is gone
                await self._close(client)
