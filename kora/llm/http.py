"""One POST over httpx, its transport failures turned into retryable ProviderErrors."""

from __future__ import annotations

from typing import Any

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
