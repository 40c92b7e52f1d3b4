"""Servers that misbehave the ways issue 25 lists, speaking real HTTP on 127.0.0.1.

`Misbehaving` is a loopback server (tests.loopback) whose next answers are scripted as
behaviours, on any path:

- `trickle()`: 200 and its headers at once, then one byte of body at a time, never the
  last: each byte comes when an event the test never sets has not come within
  `interval` seconds, so no per-read timeout ever trips;
- `huge(size, declared=True)`: a body of `size` bytes, sent in chunks as fast as the
  client reads (with or without a Content-Length);
- `redirect(status, location)`: a 3xx and its Location, no body;
- `body(data, status=200)`: exactly these bytes (`b""`: a 200 with no body);
- `echo_token()`: a JSON reply whose `reply` field quotes the request's bearer token,
  raw and in the forms masking must find.

With nothing scripted it answers `{"reply": "ok"}`. Every request is recorded.
"""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tests.loopback import LoopbackServer, Recorded

Behaviour = Callable[[web.Request, "Misbehaving"], Awaitable[web.StreamResponse]]
CHUNK = 64 * 1024


def trickle(interval: float = 0.05, first: bytes = b'{"reply": "') -> Behaviour:
    async def run(request: web.Request, srv: Misbehaving) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"content-type": "application/json"})
        await resp.prepare(request)
        try:
            await resp.write(first)
            while True:  # until the client goes away, or the server stops
                try:
                    await asyncio.wait_for(srv.never.wait(), interval)
                except TimeoutError:
                    await resp.write(b"a")
        except ConnectionError:  # the client gave up: what the test wants
            return resp

    return run


def huge(size: int, *, declared: bool = True) -> Behaviour:
    async def run(request: web.Request, srv: Misbehaving) -> web.StreamResponse:
        headers = {"content-type": "application/json"}
        if declared:
            headers["content-length"] = str(size)
        resp = web.StreamResponse(status=200, headers=headers)
        await resp.prepare(request)
        sent = 0
        block = b"a" * CHUNK
        try:
            while sent < size:
                part = block[: min(CHUNK, size - sent)]
                await resp.write(part)
                sent += len(part)
                srv.sent_bytes = sent
            await resp.write_eof()
        except ConnectionError:  # the client stopped reading: what the test wants
            pass
        return resp

    return run


def redirect(status: int = 302, location: str = "https://login.example/") -> Behaviour:
    async def run(request: web.Request, srv: Misbehaving) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location})

    return run


def body(data: bytes, status: int = 200, content_type: str = "application/json") -> Behaviour:
    async def run(request: web.Request, srv: Misbehaving) -> web.StreamResponse:
        return web.Response(status=status, body=data, headers={"content-type": content_type})

    return run


def token_forms(token: str) -> list[str]:
    """A token as a server may send it back: raw, JSON-escaped (every character), percent-
    encoded, and inside a basic-auth pair's base64."""
    return [
        token,
        "".join(f"\\u{ord(c):04x}" for c in token),
        urllib.parse.quote(token, safe=""),
        base64.b64encode(f"kora:{token}".encode()).decode(),
    ]


def echo_token(prefix: str = "you sent ") -> Behaviour:
    async def run(request: web.Request, srv: Misbehaving) -> web.StreamResponse:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        # the JSON-escaped form must stay escaped on the wire: build the text by hand
        text = prefix + " | ".join(token_forms(token))
        raw = '{"reply": "' + text + '"}'
        return web.Response(status=200, body=raw.encode(), content_type="application/json")

    return run


async def _default(request: web.Request, srv: Misbehaving) -> web.StreamResponse:
    return web.json_response({"reply": "ok"})


class Misbehaving(LoopbackServer):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.behaviours: list[Behaviour] = []
        self.always: Behaviour | None = None  # every request, once the script is done
        self.sent_bytes = 0
        self.never = asyncio.Event()  # made again in the server's loop

    def next(self, *behaviours: Behaviour) -> Misbehaving:
        with self.lock:
            self.behaviours.extend(behaviours)
        return self

    def every(self, behaviour: Behaviour) -> Misbehaving:
        self.always = behaviour
        return self

    async def serve(self) -> None:
        self.never = asyncio.Event()  # bound to the server's event loop
        await super().serve()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            parsed: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            parsed = raw.decode(errors="replace")
        rec = Recorded(
            request.method,
            request.path,
            dict(request.query),
            {k.lower(): v for k, v in request.headers.items()},
            parsed,
            0.0,
        )
        with self.lock:
            self.requests.append(rec)
            behaviour = self.behaviours.pop(0) if self.behaviours else self.always
            self.changed.notify_all()  # for wait_for: a loaded machine reads a request late
        return await (behaviour or _default)(request, self)
