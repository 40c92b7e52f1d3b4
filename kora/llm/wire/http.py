"""What every model behind a web API shares, whatever sends its requests
(kora.llm.wire.aio): who is calling and its key, where the service is, what a connection
that could not be made means, and a client for each event loop."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from kora.llm.base import ProviderError
from kora.llm.settings.bounds import DEFAULT_TIMEOUT
from kora.llm.settings.config import ModelConfig


class Caller(Protocol):
    """Who sends a request: the label that names it in every error, its timeout, its key
    (masked in them), and what set its URL (`cannot_connect`)."""

    label: str
    timeout: float
    _key: str | None
    source: str


def address(url: str) -> tuple[str, int] | None:
    """The host and port a URL connects to (None: no host, or a port that is no number)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def cannot_connect(label: str, url: str, exc: BaseException, source: str) -> str:
    """What a connection to `url` that could not be made means, and what to check, by what
    the attempt met (`exc` and its causes) and what set the URL (`source`, as
    ModelConfig.endpoint names it: "public", "base_url", a variable): the words of both a
    call (`unreachable`) and the run's check before its first job (kora.run.preflight)."""
    reason = str(exc) or type(exc).__name__
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(seen) < 10:  # the most specific words: the OS's
        seen.append(cur)
        if isinstance(cur, OSError) and cur.strerror:
            code = cur.errno
            reason = os.strerror(code) if isinstance(code, int) and code > 0 else cur.strerror
        cur = cur.__cause__ or cur.__context__
    parts = urlsplit(url)
    if "@" in parts.netloc:  # from an environment variable: never shown with credentials
        url = parts._replace(netloc="****@" + parts.netloc.rpartition("@")[2]).geturl()
    where = "{}:{}".format(*(address(url) or (parts.hostname, "?")))
    unresolved = any(isinstance(e, socket.gaierror) for e in seen)
    if unresolved:
        what = f"the host {parts.hostname} does not resolve"
    elif any(isinstance(e, OSError) and e.errno == errno.ECONNREFUSED for e in seen):
        what = f"{where} refused the connection"
    else:  # no route, network down
        what = f"no connection to {where}"
    if source == "public":
        advice = (
            "check this machine's internet connection and DNS (behind a proxy, set "
            "HTTPS_PROXY), or point the model at another server with base_url"
        )
    elif unresolved:
        advice = f"is {source} right?"
    else:
        advice = f"is the service running, and is {source} right?"
    return f"{label}: cannot connect to {url}: {what} ({reason[:200]}): {advice}"


def unreachable(
    by: Caller, url: str, exc: BaseException, source: str | None = None
) -> ProviderError:
    """No connection to `url` could be made (`cannot_connect` says why): a wrong URL, a
    service not running, no network, which no retry fixes. `source`: what set `url`, when
    not the caller's (a proxy's variables)."""
    message = cannot_connect(by.label, url, exc, source or by.source)
    return ProviderError(message, status=None, unreachable=True)


def read_key(env: str, label: str, *, required: bool) -> str | None:
    """The API key from `env`; a required one that is unset is a clear, final error."""
    key = os.environ.get(env) or None
    if key is None and required:
        raise ProviderError(f"{label}: environment variable {env} is not set", retryable=False)
    return key


def bearer(key: str | None) -> dict[str, str]:
    """The Authorization header of a key; none without one (a local server may need
    none)."""
    return {"Authorization": f"Bearer {key}"} if key else {}


C = TypeVar("C")


class LoopBound(Generic[C]):
    """A provider's client, made anew for each event loop: a client's connections belong
    to the loop that opened them, and each job (or test) may run several loops in turn."""

    def __init__(self, make: Callable[[], C], close: Callable[[C], Awaitable[None]]) -> None:
        self._make = make
        self._close = close
        self._clients: list[C] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> C:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or not self._clients:
            self._clients = [self._make()]
            self._loop = loop
        return self._clients[0]

    async def aclose(self) -> None:
        clients, self._clients = self._clients, []
        for client in clients:
            with contextlib.suppress(RuntimeError):  # its event loop is gone
                await self._close(client)


class RemoteModel:
    """What every provider of a model behind a web API holds: the model's name and
    config, a label that names it in every error, where the service is
    (`ModelConfig.endpoint`: the config's `base_url`, else the provider's environment
    variable, else the public API), which variable holds the key, and the timeout."""

    def __init__(self, name: str, config: ModelConfig) -> None:
        self.name = name
        self.config = config
        self.model = config.model or ""
        self.label = f"model {name!r} ({self.model})"
        # the provider's variables and public API: its kind's (kora.llm.registry)
        env, self.key_required = config.api_key()
        self.key_env = env or ""
        where = config.endpoint()
        self.base_url = self.normalise_url(where[0] if where else "")
        self.source = where[1] if where else "base_url"  # what set it (`cannot_connect`)
        self.timeout = config.timeout or DEFAULT_TIMEOUT
        self.max_reply_bytes = config.max_reply_bytes
        self._key: str | None = None

    def _read_key(self) -> str | None:
        """The API key, if set (a needed one that is not: a ProviderError)."""
        self._key = read_key(self.key_env, self.label, required=self.key_required)
        return self._key

    def normalise_url(self, url: str) -> str:
        return url.rstrip("/")

    def secrets(self) -> set[str]:
        """What must never be written or shown: the key, once read."""
        return {self._key} if self._key else set()
