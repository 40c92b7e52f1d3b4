"""Every request kora makes over HTTP goes out here, on aiohttp: a model's calls, a chat
service's steps, the Batch API's files. Its transport failures are turned into
ProviderErrors (retryable, naming the model and never the key), its answer read up to the
model's size limit (kora.llm.settings.bounds).

aiohttp rather than httpx (which the SDKs use): aiohttp's pool
takes a connection in constant time, while httpx's scans every connection of its pool at
each request and each answer: at a top-tier provider limit (hundreds of calls in flight)
that scan cost more CPU than the rest of a call (bench/README.md, "Where the CPU goes").
The session tells the model's limiter when it writes each request (its trace), which
counts the request against the server's window from then (kora.llm.limits.turns).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

import aiohttp

from kora.llm.base import ProviderError
from kora.llm.limits import wrote
from kora.llm.masking import redact
from kora.llm.settings.bounds import read_body, timed_out
from kora.llm.settings.config import ModelConfig
from kora.llm.wire.http import Caller, LoopBound, RemoteModel, unreachable


@dataclass(frozen=True)
class Answer:
    """A response whatever its status, its body whole (and decoded if it was encoded)."""

    status: int
    reason: str
    headers: Any  # a case-insensitive mapping of the response's headers
    body: bytes
    charset: str | None = None  # as the Content-Type names it

    @property
    def text(self) -> str:
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know: read as UTF-8, as httpx did
            return self.body.decode(errors="replace")


def identity(headers: Mapping[str, str]) -> bool:
    """A body sent as it is (no content encoding): its Content-Length is its size.
    `headers`: a case-insensitive mapping."""
    return headers.get("content-encoding", "identity").strip().lower() in ("", "identity")


async def _written(*_: object) -> None:
    wrote()


def new_session(timeout: float, headers: dict[str, str]) -> aiohttp.ClientSession:
    """A session for many concurrent calls of one model (it belongs to one event loop)."""
    trace = aiohttp.TraceConfig()
    # the body's first chunk, not the headers: aiohttp holds the headers back to send
    # them with it, from a task of its own (on the next turn of the loop, or later)
    trace.on_request_chunk_sent.append(_written)
    return aiohttp.ClientSession(
        headers=headers,
        timeout=aiohttp.ClientTimeout(sock_connect=min(timeout, 30.0), sock_read=timeout),
        connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=5.0),
        trace_configs=[trace],
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


async def send(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    data: bytes | aiohttp.MultipartWriter | None,
    *,
    by: Caller,
    limit: int | None,
    proxy: str | None = None,
    redirects: bool = False,
    headers: dict[str, str] | None = None,
) -> Answer:
    """One request, whatever its answer's status; a redirect followed only when
    `redirects` (Anthropic's SDK follows them, OpenAI's API and a chat service by choice)."""
    try:
        async with session.request(
            method, url, data=data, headers=headers, allow_redirects=redirects, proxy=proxy
        ) as raw:
            # the Content-Length of an encoded (compressed) body is not its size
            declared = raw.headers.get("content-length") if identity(raw.headers) else None
            body = await read_body(raw.content.iter_chunked(1 << 16), limit, by.label, declared)
            return Answer(raw.status, raw.reason or "", raw.headers, body, raw.charset)
    except ProviderError:
        raise
    except aiohttp.ClientProxyConnectionError as exc:  # the proxy's, not the service's
        raise unreachable(by, str(proxy), exc, "HTTP_PROXY, HTTPS_PROXY or ALL_PROXY") from None
    except aiohttp.ClientConnectorError as exc:  # no connection could be made
        raise unreachable(by, url, exc) from None
    except (TimeoutError, aiohttp.ServerTimeoutError):
        raise timed_out(by.label, by.timeout) from None
    except aiohttp.ClientError as exc:  # dropped, cut short, too many redirects
        raise ProviderError(
            f"{by.label}: connection failed ({type(exc).__name__}: {redact(str(exc), by._key)[:200]})",
            status=None,
        ) from None


class AioModel(RemoteModel):
    """A model whose calls are requests over aiohttp (`_send`): a session for each event
    loop with the headers the provider sends (`_session_headers`), and the proxy the
    environment names for its endpoint."""

    # its session reports when it writes each request (`new_session`): the limiter counts
    # the request from then (kora.llm.client passes this on)
    reports_writes: ClassVar[bool] = True

    def __init__(self, name: str, config: ModelConfig) -> None:
        super().__init__(name, config)
        self._sessions = LoopBound(
            lambda: new_session(self.timeout, self._session_headers()), lambda s: s.close()
        )
        self._proxy = env_proxy(self.base_url)

    def _session_headers(self) -> dict[str, str]:
        """The headers of every call (reading the key, which `secrets` then names)."""
        raise NotImplementedError

    async def _send(
        self,
        url: str,
        data: bytes | aiohttp.MultipartWriter | None,
        *,
        method: str = "POST",
        whole: bool = False,
        **kw: Any,
    ) -> Answer:
        """One request: its answer read up to the model's size limit, never whole before
        it is known to fit (`whole`: a batch's file, which holds many answers)."""
        limit = None if whole else self.max_reply_bytes
        session = self._sessions.get()
        return await send(session, method, url, data, by=self, limit=limit, proxy=self._proxy, **kw)

    async def aclose(self) -> None:
        await self._sessions.aclose()
