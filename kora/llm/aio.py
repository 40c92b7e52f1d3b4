"""One model call over aiohttp: a POST, its transport failures turned into ProviderErrors
(retryable, naming the model and never the key), its answer read up to the model's size
limit (kora.llm.bounds).

The providers' calls go out this way rather than through httpx because aiohttp's pool
takes a connection in constant time, while httpx's scans every connection of its pool at
each request and each answer: at a top-tier provider limit (hundreds of calls in flight)
that scan cost more CPU than the rest of a call (bench/README.md, "Where the CPU goes").
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from kora.llm.base import ProviderError
from kora.llm.bounds import read_body, timed_out
from kora.llm.http import unreachable
from kora.llm.retry import redact


@dataclass(frozen=True)
class Answer:
    """A response whatever its status, its body whole (and decoded if it was encoded)."""

    status: int
    reason: str
    headers: Any  # a case-insensitive mapping of the response's headers
    body: bytes


def new_session(timeout: float, headers: dict[str, str]) -> aiohttp.ClientSession:
    """A session for many concurrent calls of one model (it belongs to one event loop)."""
    return aiohttp.ClientSession(
        headers=headers,
        timeout=aiohttp.ClientTimeout(sock_connect=min(timeout, 30.0), sock_read=timeout),
        connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=5.0),
    )


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url`, as httpx and the SDKs read it
    (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, less the hosts of NO_PROXY; either case): behind
    a company proxy the API is reached through it. Read once per model: aiohttp's own
    `trust_env` reads the environment and ~/.netrc again at every request."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):  # NO_PROXY
        return None
    return proxies.get(parts.scheme) or proxies.get("all")


async def post(
    session: aiohttp.ClientSession,
    url: str,
    data: bytes,
    *,
    label: str,
    timeout: float,
    key: str | None,
    limit: int | None,
    proxy: str | None = None,
    redirects: bool = False,
) -> Answer:
    """POST `data` (JSON) to `url`; a redirect followed only when `redirects` (as the
    provider's SDK or client did before: Anthropic's follows them, httpx does not)."""
    try:
        async with session.post(url, data=data, allow_redirects=redirects, proxy=proxy) as raw:
            declared = raw.headers.get("content-length")
            if raw.headers.get("content-encoding", "identity").strip().lower() not in (
                "",
                "identity",
            ):
                declared = None  # a compressed body's length is not its size
            body = await read_body(raw.content.iter_chunked(1 << 16), limit, label, declared)
            return Answer(raw.status, raw.reason or "", raw.headers, body)
    except ProviderError:
        raise
    except aiohttp.ClientConnectorError as exc:  # no connection could be made
        raise unreachable(label, url, exc) from None
    except (TimeoutError, aiohttp.ServerTimeoutError):
        raise timed_out(label, timeout) from None
    except aiohttp.ClientError as exc:  # dropped, cut short, too many redirects
        raise ProviderError(
            f"{label}: connection failed ({type(exc).__name__}: {redact(str(exc), key)[:200]})",
            status=None,
        ) from None
