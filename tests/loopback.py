"""Loopback servers speaking the real wire protocols, for the tests and the benchmark.

Each server is an `aiohttp.web` application (keep-alive, many concurrent connections, a
handler per request) served in a background thread on 127.0.0.1 with a free port:

- `AnthropicServer`: `POST /v1/messages` (text blocks, or a `tool_use` block when `tools`
  are given and `tool_choice` does not say `none`; `usage` filled in), Anthropic error
  bodies; with `thinking` enabled, a `thinking` and a `redacted_thinking` block before
  the answer, and the API's refusals of a budget under 1,024, `max_tokens` not above it,
  a temperature other than 1 and a forced tool choice.
- `OpenAIServer`: `POST /v1/chat/completions` (`response_format: json_schema` answered
  with JSON content) and the Responses API's `POST /v1/responses` (`text.format:
  json_schema`), OpenAI error bodies; its reasoning models (`reasoning_models`) take
  `reasoning_effort`, refuse `max_tokens` and a temperature other than 1 as OpenAI's do,
  and answer with reasoning tokens in the usage (and a reasoning item, in a Responses
  answer).
- `ChatEndpointServer`: the MyDD contract (`/restore_session_memory`,
  `/query_chat_langchain_mem?session_id=`), keeping each session's history.

Every server records each request (`requests`), counts answers by status, tracks the
largest number of requests in flight, and can misbehave on cue: `script(*faults)` queues
faults for the next requests, `fault_rate` adds random ones, `rate_limit` refuses
requests above N per second (sliding window) with 429 + Retry-After, and `latency` delays
every accepted answer. A dropped connection is aborted (RST) before any byte of an answer
is written; a malformed answer is a 200 whose JSON body is cut off. `Servers` starts them
for one test and stops them all after it (tests/conftest.py's `serve` fixture).

Why aiohttp: it serves many slow requests at once on one event loop (the benchmark keeps
160 in flight), and its handlers can reach the connection's transport to abort it. A
WSGI test server (pytest-httpserver: werkzeug, a thread per request) cannot hold that
many slow requests, and an ASGI app cannot drop a connection without answering.
"""

from __future__ import annotations

import asyncio
import email.policy
import hashlib
import json
import math
import random
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import BytesParser
from typing import Any, ClassVar, Literal, Self, TypeVar
from urllib.parse import parse_qs, urlsplit

from aiohttp import web

FaultKind = Literal["status", "slow", "drop", "malformed", "invalid"]


@dataclass(frozen=True)
class Fault:
    """One misbehaviour: an HTTP error `status` (with `retry_after` seconds if given), a
    `slow` answer (after `delay` s), a `drop`ped connection, a `malformed` JSON body, or an
    `invalid` answer (schema-violating structured output / no `response` field)."""

    kind: FaultKind
    status: int = 500
    retry_after: float | None = None
    delay: float = 0.0
    message: str = ""

    @staticmethod
    def http(status: int, retry_after: float | None = None, message: str = "") -> Fault:
        return Fault("status", status=status, retry_after=retry_after, message=message)

    @staticmethod
    def slow(delay: float) -> Fault:
        return Fault("slow", delay=delay)


SERVER_ERROR = Fault("status", status=500)
DROP = Fault("drop")
MALFORMED = Fault("malformed")
INVALID = Fault("invalid")


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    time: float


@dataclass
class Reply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def json(status: int, obj: Any, headers: dict[str, str] | None = None) -> Reply:
        return Reply(status, json.dumps(obj).encode(), headers or {})


class _Drop(Exception):
    pass


# reason phrases aiohttp does not know (the rest come from http.HTTPStatus)
REASONS = {529: "Overloaded"}
# the largest request body accepted (aiohttp's default is 1 MiB)
MAX_BODY = 64 * 1024 * 1024


def busiest_second(arrivals: list[float]) -> int:
    """The most arrivals in any one-second window: what `LoopbackServer`'s rate limit
    (a sliding one-second window) holds to its limit."""
    arrivals, most, j = sorted(arrivals), 0, 0
    for i, t in enumerate(arrivals):
        while arrivals[j] <= t - 1.0:
            j += 1
        most = max(most, i - j + 1)
    return most


class LoopbackServer:
    """Base: HTTP plumbing, recording, faults, rate limit and latency."""

    def __init__(
        self,
        *,
        port: int = 0,
        latency: float = 0.0,
        fault_rate: float = 0.0,
        random_fault: Fault = SERVER_ERROR,
        rate_limit: float | None = None,
        seed: int = 0,
        record: bool = True,
    ) -> None:
        self.requested_port = port
        self.port = 0
        self.latency = latency
        self.fault_rate = fault_rate
        self.random_fault = random_fault
        self.rate_limit = rate_limit
        self.record = record
        self.rng = random.Random(seed)
        self.lock = threading.RLock()  # re-entered by wait_for predicates that read count
        # notified whenever a request arrives or ends: tests wait on it, never on time
        self.changed = threading.Condition(self.lock)
        self.faults: deque[Fault] = deque()
        self.requests: list[Recorded] = []
        self.statuses: Counter[int] = Counter()
        self.accepted_times: list[float] = []
        self.refused_times: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._window: deque[float] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # -- control ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *faults: Fault) -> None:
        with self.lock:
            self.faults.extend(faults)

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.requests) if self.record else sum(self.statuses.values())

    def wait_for(self, done: Callable[[LoopbackServer], bool], timeout: float) -> bool:
        """Wait until `done(self)` holds (checked whenever a request arrives or ends);
        False if it did not within `timeout` seconds."""
        with self.changed:
            return self.changed.wait_for(lambda: done(self), timeout)

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self.serve())
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()

    async def serve(self) -> None:
        """Serve until stop()."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{path:.*}", self._handle)
        # answers still being delayed when the server stops are cut short, as before
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await runner.setup()
        try:
            site = web.TCPSite(
                runner, "127.0.0.1", self.requested_port, backlog=1024, reuse_address=True
            )
            await site.start()
            self.port = runner.addresses[0][1]
            self._ready.set()
            await self._stop.wait()
        finally:
            await runner.cleanup()

    # -- HTTP ------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            reply = await self._dispatch(request, await request.read())
        except _Drop:
            # no answer at all: reset the connection; aiohttp then finds it closed and
            # writes nothing (a premature disconnection, not an error)
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)
        headers = {"content-type": "application/json", **reply.headers}
        return web.Response(
            status=reply.status,
            reason=REASONS.get(reply.status),
            body=reply.body,
            headers=headers,
        )

    async def _dispatch(self, req: web.Request, raw: bytes) -> Reply:
        split = urlsplit(req.raw_path)
        query = {k: v[0] for k, v in parse_qs(split.query).items()}
        headers = {k.lower(): v for k, v in req.headers.items()}
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        now = time.time()
        rec = Recorded(req.method, split.path, query, headers, body, now)
        with self.lock:
            if self.record:
                self.requests.append(rec)
            refused = self._over_rate(now)
            fault = self.faults.popleft() if self.faults and not refused else None
            if (
                fault is None
                and not refused
                and self.fault_rate
                and self.rng.random() < self.fault_rate
            ):
                fault = self.random_fault
            if not refused:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.changed.notify_all()
        try:
            if refused is not None:
                reply = self.error_reply(429, "rate limit exceeded", retry_after=refused)
            else:
                reply = await self._answer(rec, fault)
        finally:
            if refused is None:
                with self.lock:
                    self.in_flight -= 1
                    self.changed.notify_all()
        with self.lock:
            self.statuses[reply.status] += 1
            if refused is None and reply.status < 400:
                self.accepted_times.append(now)
            elif reply.status == 429:
                self.refused_times.append(now)
        return reply

    def _over_rate(self, now: float) -> float | None:
        """Sliding one-second window; the Retry-After (whole seconds) when over."""
        if self.rate_limit is None:
            return None
        while self._window and self._window[0] <= now - 1.0:
            self._window.popleft()
        if len(self._window) >= self.rate_limit:
            return float(max(1, math.ceil(self._window[0] + 1.0 - now)))
        self._window.append(now)
        return None

    async def _answer(self, rec: Recorded, fault: Fault | None) -> Reply:
        if fault is not None:
            if fault.kind == "status":
                return self.error_reply(
                    fault.status, fault.message or "scripted failure", retry_after=fault.retry_after
                )
            if fault.kind == "drop":
                raise _Drop
            if fault.kind == "slow":
                await asyncio.sleep(fault.delay)
            if fault.kind == "malformed":
                return Reply(200, b'{"id": "x", "choices": [ {"message": ')
        if self.latency:
            await asyncio.sleep(self.latency)
        return self.handle(rec, invalid=fault is not None and fault.kind == "invalid")

    # -- protocol-specific ---------------------------------------------------------

    def handle(self, rec: Recorded, *, invalid: bool) -> Reply:
        return Reply.json(404, {"error": "not found"})

    def error_reply(self, status: int, message: str, *, retry_after: float | None = None) -> Reply:
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        return Reply.json(status, {"error": {"message": message, "code": status}}, headers)


@dataclass(frozen=True)
class Ended:
    """A text answer that ends for a given reason, in the provider's own words
    (Anthropic `stop_reason`, OpenAI `finish_reason`); `refusal` is OpenAI's refusal
    field, sent with a null `content`."""

    text: str
    reason: str
    refusal: str | None = None


Answer = str | dict[str, Any] | Ended


class _TokenBucket:
    """A provider's token limit: `per_minute` tokens refilled continuously, at most
    `burst` seconds' worth held; a request is admitted when its tokens are there."""

    def __init__(self, per_minute: float, burst: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = self.rate * burst
        self.level = self.capacity
        self.at = time.time()

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = max(self.at, now)

    def take(self, tokens: int, now: float) -> float | None:
        """None when admitted; else the Retry-After (whole seconds)."""
        self._refill(now)
        if tokens <= self.level:
            self.level -= tokens
            return None
        return float(max(1, math.ceil((tokens - self.level) / self.rate)))

    def debit(self, tokens: int, now: float) -> None:
        self._refill(now)
        self.level -= tokens

    def reading(self, now: float) -> tuple[float, float]:
        """(remaining, seconds until full again)."""
        self._refill(now)
        return max(0.0, self.level), (self.capacity - self.level) / self.rate


class _LLMServer(LoopbackServer):
    """Shared by the Anthropic and OpenAI servers: scripted answers, an API key, and
    optionally a token limit (`tokens_per_minute`: the input tokens for Anthropic, input
    and output together for OpenAI), refused with 429 past it; with `limit_headers` every
    answer carries the provider's rate-limit headers for its limits."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        structured: Callable[[Recorded], dict[str, Any]] | None = None,
        tokens_per_minute: float | None = None,
        token_burst: float = 1.0,
        limit_headers: bool = True,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.api_key = api_key
        self.answers: deque[Answer] = deque()
        self.structured = structured or (lambda rec: {"answer": "ok"})
        self.tokens = (
            None if tokens_per_minute is None else _TokenBucket(tokens_per_minute, token_burst)
        )
        self.limit_headers = limit_headers
        self.accepted_tokens = 0
        # Anthropic's prompt cache (AnthropicServer): stored prefixes and tokens counted
        self.prompt_cache: set[str] = set()
        self.cache_reads = 0
        self.cache_writes = 0
        self._incoming = 0
        # what the server billed: each answer it served (a batch's when the batch is made),
        # its tokens by kind as the client reads them (input apart from the prompt cache's)
        self.served: Counter[str] = Counter()

    def bill(self, tin: int, tout: int, write: int = 0, read: int = 0, reasoning: int = 0) -> None:
        with self.lock:
            self.served.update(
                calls=1,
                input_tokens=tin,
                output_tokens=tout,
                cache_write_tokens=write,
                cache_read_tokens=read,
                reasoning_tokens=reasoning,  # a part of tout
            )

    def request_tokens(self, body: Any) -> int:
        """The tokens a request is charged on arrival."""
        return 0

    def limit_headers_for(self, now: float) -> dict[str, str]:
        return {}

    async def _dispatch(self, req: web.Request, raw: bytes) -> Reply:
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        # read by _over_rate, which the base class calls before its first await, so no
        # other request can come in between
        self._incoming = self.request_tokens(body) if isinstance(body, dict) else 0
        reply = await super()._dispatch(req, raw)
        if self.limit_headers:
            with self.lock:
                reply.headers.update(self.limit_headers_for(time.time()))
        return reply

    def _over_rate(self, now: float) -> float | None:
        refused = super()._over_rate(now)
        if refused is not None or self.tokens is None:
            return refused
        refused = self.tokens.take(self._incoming, now)
        if refused is None:
            self.accepted_tokens += self._incoming
        return refused

    def _requests_reading(self, now: float) -> tuple[float, float, float] | None:
        """(limit per minute, remaining, seconds until full) of the request window."""
        if self.rate_limit is None:
            return None
        window = [t for t in self._window if t > now - 1.0]
        reset = window[-1] + 1.0 - now if window else 0.0
        return self.rate_limit * 60, max(0.0, self.rate_limit - len(window)), reset

    def answer(self, *answers: Answer) -> None:
        """Answer the next requests with these (text, or a dict for a structured call)."""
        with self.lock:
            self.answers.extend(answers)

    def _next_answer(self, rec: Recorded, *, structured: bool, invalid: bool) -> Answer:
        with self.lock:
            scripted = self.answers.popleft() if self.answers else None
        if invalid:
            return {"unexpected": True} if structured else ""
        if scripted is not None:
            return scripted
        if structured:
            return self.structured(rec)
        return f"echo: {last_user_text(rec.body)}"


def last_user_text(body: Any) -> str:
    turns = (body.get("messages") or body.get("input") or []) if isinstance(body, dict) else []
    for m in reversed(turns if isinstance(turns, list) else []):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, list):
                return " ".join(str(b.get("text", "")) for b in c if isinstance(b, dict))
            return str(c)
    return ""


def _tokens(obj: Any) -> int:
    return max(1, len(json.dumps(obj)) // 4)


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AnthropicServer(_LLMServer):
    """`POST /v1/messages` of the Anthropic Messages API; a token limit is on input tokens
    (remaining rounded to the nearest thousand and reset as an RFC 3339 time, as the API
    sends them)."""

    def request_tokens(self, body: Any) -> int:
        """As the API's input-token limit counts: tokens read from the prompt cache are
        not charged against it, the rest is (cache writes included)."""
        if not isinstance(body.get("messages"), list):
            return _tokens(body.get("messages")) + _tokens(body.get("system", ""))
        usage = self._input_usage(body, store=False)
        return usage["input_tokens"] + usage.get("cache_creation_input_tokens", 0)

    def limit_headers_for(self, now: float) -> dict[str, str]:
        headers: dict[str, str] = {}
        requests = self._requests_reading(now)
        if requests is not None:
            limit, remaining, reset = requests
            headers["anthropic-ratelimit-requests-limit"] = f"{limit:.0f}"
            headers["anthropic-ratelimit-requests-remaining"] = f"{remaining:.0f}"
            headers["anthropic-ratelimit-requests-reset"] = _rfc3339(now + reset)
        if self.tokens is not None:
            remaining, reset = self.tokens.reading(now)
            p = "anthropic-ratelimit-input-tokens"
            headers[f"{p}-limit"] = f"{self.tokens.rate * 60:.0f}"
            headers[f"{p}-remaining"] = f"{round(remaining, -3):.0f}"
            headers[f"{p}-reset"] = _rfc3339(now + reset)
        return headers

    THOUGHT = "SECRET-THINKING: the child may be at risk, so"
    _DOCS = "Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"

    def _thinking_refusal(self, body: dict[str, Any]) -> Reply | None:
        """What the Messages API answers a request with thinking on that it cannot take."""
        budget = body["thinking"].get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return self.error_reply(
                400, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            )
        if body["max_tokens"] <= budget:
            return self.error_reply(
                400,
                "`max_tokens` must be greater than `thinking.budget_tokens`. "
                f"{self._DOCS}#max-tokens-and-context-window-size",
            )
        if body.get("temperature", 1) != 1:
            return self.error_reply(
                400,
                "`temperature` may only be set to 1 when thinking is enabled. "
                f"{self._DOCS}#important-considerations-when-using-extended-thinking",
            )
        if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
            return self.error_reply(
                400, "Thinking may not be enabled when tool_choice forces tool use."
            )
        for i, m in enumerate(body["messages"]):
            # a turn that called a tool is passed back with the thinking before it
            blocks = m["content"] if isinstance(m["content"], list) else []
            kinds = [b.get("type") for b in blocks]
            if (
                m["role"] == "assistant"
                and "tool_use" in kinds
                and kinds[0]
                not in (
                    "thinking",
                    "redacted_thinking",
                )
            ):
                return self.error_reply(
                    400,
                    f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                    f"but found `{kinds[0]}`.",
                )
        return None

    def error_reply(self, status: int, message: str, *, retry_after: float | None = None) -> Reply:
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            404: "not_found_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(status, "api_error")
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        headers["request-id"] = f"req_{uuid.uuid4().hex[:12]}"
        return Reply.json(
            status, {"type": "error", "error": {"type": kind, "message": message}}, headers
        )

    def handle(self, rec: Recorded, *, invalid: bool) -> Reply:
        if rec.path.startswith("/v1/messages/batches"):
            return self._batches(rec, invalid=invalid)
        if rec.method != "POST" or rec.path != "/v1/messages":
            return self.error_reply(404, f"no route {rec.method} {rec.path}")
        # the SDK sends the key as x-api-key or (recent versions) a bearer token
        bearer = rec.headers.get("authorization", "")
        given = rec.headers.get("x-api-key") or bearer.removeprefix("Bearer ") or None
        if self.api_key is not None and given != self.api_key:
            return self.error_reply(401, f"invalid x-api-key: {given}")
        body = rec.body
        if not isinstance(body, dict):
            return self.error_reply(400, "body is not a JSON object")
        for required in ("model", "max_tokens", "messages"):
            if required not in body:
                return self.error_reply(400, f"{required}: Field required")
        for i, m in enumerate(body["messages"]):
            if not m.get("content"):
                return self.error_reply(
                    400, f"messages.{i}: all messages must have non-empty content"
                )
            if isinstance(m["content"], str) and not m["content"].strip():
                return self.error_reply(
                    400, f"messages.{i}: text content blocks must contain non-whitespace text"
                )
        tools = body.get("tools") or []
        choice = body.get("tool_choice") or {}
        thinking = body.get("thinking") or {}
        if thinking.get("type") == "enabled" and (refused := self._thinking_refusal(body)):
            return refused
        # the model calls the tool it is offered unless told not to (`none`)
        calls = bool(tools) and choice.get("type") != "none"
        answer = self._next_answer(rec, structured=calls, invalid=invalid)
        if calls:
            content: list[dict[str, Any]] = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:20]}",
                    "name": choice.get("name") or tools[0]["name"],
                    "input": answer if isinstance(answer, dict) else {"text": answer},
                }
            ]
            stop = "tool_use"
        elif isinstance(answer, Ended):
            content = [{"type": "text", "text": answer.text}] if answer.text else []
            stop = answer.reason
        else:
            text = answer if isinstance(answer, str) else json.dumps(answer)
            content = [{"type": "text", "text": text}]
            stop = "end_turn"
        usage: dict[str, Any] = {**self._input_usage(body), "output_tokens": _tokens(content)}
        if thinking.get("type") == "enabled":
            # its thinking (and a block of it the safety systems encrypted) before the answer,
            # counted in output_tokens, never apart: the Messages API's usage has no such field
            thought = [
                {"type": "thinking", "thinking": self.THOUGHT, "signature": "c2lnbmF0dXJl"},
                {"type": "redacted_thinking", "data": "RU5DUllQVEVEIFNFQ1JFVA=="},
            ]
            content = thought + content
            usage["output_tokens"] += _tokens(thought)
        self.bill(
            usage["input_tokens"],
            usage["output_tokens"],
            usage.get("cache_creation_input_tokens", 0),
            usage.get("cache_read_input_tokens", 0),
        )
        return Reply.json(
            200,
            {
                "id": f"msg_{uuid.uuid4().hex[:20]}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            },
        )

    # --- Message Batches: each request answered when the batch is made, the batch ending
    # `batch_latency` seconds later; `batch_faults` ("expired", "errored") apply to the
    # next requests, one each

    batch_latency = 0.0

    def _batches(self, rec: Recorded, *, invalid: bool) -> Reply:
        parts = rec.path.strip("/").split("/")  # v1 messages batches [id [results]]
        now = time.time()
        if rec.method == "POST" and len(parts) == 3:
            if not hasattr(self, "batches"):
                self.batches: dict[str, dict[str, Any]] = {}
                self.batch_faults: deque[str] = deque()
            requests = (rec.body or {}).get("requests") or []
            results = []
            for r in requests:
                with self.lock:
                    fault = self.batch_faults.popleft() if self.batch_faults else None
                if fault == "expired":
                    results.append({"custom_id": r["custom_id"], "result": {"type": "expired"}})
                    continue
                if fault == "errored":
                    err = {"type": "error", "error": {"type": "invalid_request_error",
                                                       "message": "scripted failure"}}  # fmt: skip
                    results.append(
                        {"custom_id": r["custom_id"], "result": {"type": "errored", "error": err}}
                    )
                    continue
                inner = Recorded("POST", "/v1/messages", {}, rec.headers, r["params"], now)
                reply = self.handle(inner, invalid=False)
                message = json.loads(reply.body)
                results.append(
                    {
                        "custom_id": r["custom_id"],
                        "result": {"type": "succeeded", "message": message},
                    }
                )
            bid = f"msgbatch_{uuid.uuid4().hex[:16]}"
            with self.lock:
                self.batches[bid] = {"created": now, "results": results}
            return Reply.json(200, self._batch_doc(bid, now))
        with self.lock:
            batch = getattr(self, "batches", {}).get(parts[3]) if len(parts) >= 4 else None
        if batch is None:
            return self.error_reply(404, f"no batch at {rec.path}")
        if rec.method == "GET" and len(parts) == 4:
            return Reply.json(200, self._batch_doc(parts[3], now))
        if rec.method == "GET" and parts[4:] == ["results"]:
            lines = "".join(json.dumps(x) + "\n" for x in batch["results"])
            return Reply(200, lines.encode(), {"content-type": "application/binary"})
        return self.error_reply(404, f"no route {rec.method} {rec.path}")

    def _batch_doc(self, bid: str, now: float) -> dict[str, Any]:
        batch = self.batches[bid]
        ended = now >= batch["created"] + self.batch_latency
        kinds = Counter(r["result"]["type"] for r in batch["results"])
        stamp = _rfc3339
        return {
            "id": bid,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {
                "processing": 0 if ended else len(batch["results"]),
                "succeeded": kinds["succeeded"] if ended else 0,
                "errored": kinds["errored"] if ended else 0,
                "expired": kinds["expired"] if ended else 0,
                "canceled": 0,
            },
            "created_at": stamp(batch["created"]),
            "expires_at": stamp(batch["created"] + 86400),
            "ended_at": stamp(batch["created"] + self.batch_latency) if ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{self.url}/v1/messages/batches/{bid}/results" if ended else None,
        }

    def _input_usage(self, body: dict[str, Any], store: bool = True) -> dict[str, int]:
        """Input tokens as the API counts them, with its prompt cache: a prompt is tools,
        system blocks, then message blocks; a `cache_control` marker stores the prefix up
        to it (when that is 1,024 tokens or more), and a later prompt that starts with a
        stored prefix (at any block boundary before its last marker) reads it. `store`
        false: only look (what the input-token limit is charged on arrival)."""
        plain = _tokens(body.get("messages")) + _tokens(body.get("system", ""))
        system = body.get("system")
        blocks: list[Any] = [body.get("tools")] if body.get("tools") else []
        blocks += system if isinstance(system, list) else ([system] if system else [])
        for m in body["messages"]:
            content = m["content"]
            blocks += (
                content if isinstance(content, list) else [{"role": m["role"], "text": content}]
            )
        marks = [i for i, b in enumerate(blocks) if isinstance(b, dict) and "cache_control" in b]
        if not marks:
            return {"input_tokens": plain}

        def strip(b: Any) -> Any:
            return (
                {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b
            )

        clean = [strip(b) for b in blocks]
        sizes = [_tokens(b) for b in clean]
        total = sum(sizes)
        cum = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        keys = [
            hashlib.sha256(json.dumps(clean[: i + 1]).encode()).hexdigest()
            for i in range(len(clean))
        ]
        read_at = -1
        with self.lock:
            for i in range(marks[-1], -1, -1):
                if keys[i] in self.prompt_cache:
                    read_at = i
                    break
            read = cum[read_at] if read_at >= 0 else 0
            covered = read
            write = 0
            for i in marks:
                if i > read_at and cum[i] >= 1024:
                    write += cum[i] - covered
                    covered = cum[i]
                    if store:
                        self.prompt_cache.add(keys[i])
        # the same total as the prompt without markers (blocks carry a little JSON more)
        messages = [
            {**m, "content": "".join(b.get("text", "") for b in m["content"])}
            if isinstance(m["content"], list)
            else m
            for m in body["messages"]
        ]
        text = "".join(b.get("text", "") for b in system) if isinstance(system, list) else system
        same = _tokens(messages) + _tokens(text or "")
        read, write = read * same // total, write * same // total
        if store:
            with self.lock:
                self.cache_reads += read
                self.cache_writes += write
        return {
            "input_tokens": same - read - write,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        }


def _duration(seconds: float) -> str:
    """OpenAI's reset form: `20ms`, `1.5s`, `6m0s`."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes:.0f}m{rest:.0f}s" if minutes else f"{rest:.3g}s"


class OpenAIServer(_LLMServer):
    """`POST /v1/chat/completions` of the OpenAI API (and compatible servers); a token
    limit counts input and output tokens (the output when the answer is made)."""

    cached_share = 0.0

    # --- the Batch API: files in, a batch over one, its output and error files; every
    # request answered when the batch is made, the batch completing `batch_latency`
    # seconds later; `batch_faults` ("expired", "errored") apply to the next requests

    batch_latency = 0.0

    def _batch_api(self, rec: Recorded) -> Reply:
        if not hasattr(self, "files"):
            self.files: dict[str, bytes] = {}
            self.batches: dict[str, dict[str, Any]] = {}
            self.batch_faults: deque[str] = deque()
        parts = rec.path.strip("/").split("/")
        now = time.time()
        if rec.method == "POST" and parts == ["v1", "files"]:
            raw = rec.body if isinstance(rec.body, str) else json.dumps(rec.body)
            head = f"Content-Type: {rec.headers.get('content-type', '')}\r\n\r\n"
            msg = BytesParser(policy=email.policy.default).parsebytes(head.encode() + raw.encode())
            data = b""
            for part in msg.iter_parts():
                if part.get_param("name", header="content-disposition") == "file":
                    data = part.get_payload(decode=True) or b""
            fid = f"file-{uuid.uuid4().hex[:16]}"
            with self.lock:
                self.files[fid] = data
            return Reply.json(200, {"id": fid, "object": "file", "purpose": "batch"})
        if rec.method == "POST" and parts == ["v1", "batches"]:
            body = rec.body if isinstance(rec.body, dict) else {}
            with self.lock:
                data = self.files.get(str(body.get("input_file_id")), b"")
            out, err = [], []
            for line in data.splitlines():
                r = json.loads(line)
                with self.lock:
                    fault = self.batch_faults.popleft() if self.batch_faults else None
                cid = r["custom_id"]
                if fault == "expired":
                    err.append({"custom_id": cid, "response": None,
                                "error": {"code": "batch_expired", "message": "expired"}})  # fmt: skip
                    continue
                if fault == "errored":
                    bad = {"error": {"message": "scripted failure"}}
                    err.append({"custom_id": cid, "response": {"status_code": 400, "body": bad},
                                "error": None})  # fmt: skip
                    continue
                if r["url"] != body.get("endpoint"):
                    bad = {"error": {"message": "The URL provided for this request does not "
                                     "match the batch endpoint."}}  # fmt: skip
                    err.append({"custom_id": cid, "response": {"status_code": 400, "body": bad},
                                "error": None})  # fmt: skip
                    continue
                inner = Recorded("POST", r["url"], {}, rec.headers, r["body"], now)
                reply = self.handle(inner, invalid=False)
                out.append({"custom_id": cid, "response": {"status_code": 200,
                            "body": json.loads(reply.body)}, "error": None})  # fmt: skip
            bid = f"batch_{uuid.uuid4().hex[:16]}"
            with self.lock:
                ids = {}
                for name, rows in (("output_file_id", out), ("error_file_id", err)):
                    if rows:
                        fid = f"file-{uuid.uuid4().hex[:16]}"
                        self.files[fid] = "".join(json.dumps(x) + "\n" for x in rows).encode()
                        ids[name] = fid
                self.batches[bid] = {"created": now, "endpoint": body.get("endpoint"), **ids}
            return Reply.json(200, self._batch_doc(bid, now))
        if rec.method == "GET" and len(parts) == 3 and parts[1] == "batches":
            with self.lock:
                known = parts[2] in self.batches
            if not known:
                return self.error_reply(404, f"no batch {parts[2]}")
            return Reply.json(200, self._batch_doc(parts[2], now))
        if (
            rec.method == "GET"
            and len(parts) == 4
            and parts[1] == "files"
            and parts[3] == "content"
        ):
            with self.lock:
                content = self.files.get(parts[2])
            if content is None:
                return self.error_reply(404, f"no file {parts[2]}")
            return Reply(200, content, {"content-type": "application/octet-stream"})
        return self.error_reply(404, f"no route {rec.method} {rec.path}")

    def _batch_doc(self, bid: str, now: float) -> dict[str, Any]:
        b = self.batches[bid]
        done = now >= b["created"] + self.batch_latency
        doc = {"id": bid, "object": "batch", "endpoint": b["endpoint"],
               "status": "completed" if done else "in_progress"}  # fmt: skip
        if done:
            doc.update({k: b.get(k) for k in ("output_file_id", "error_file_id")})
        return doc

    def _cached(self, messages: Any) -> int:
        n = _tokens(messages)
        return int(n * self.cached_share) // 128 * 128 if n >= 1024 else 0

    def request_tokens(self, body: Any) -> int:
        return _tokens(body.get("messages") or body.get("input"))

    def limit_headers_for(self, now: float) -> dict[str, str]:
        headers: dict[str, str] = {}
        readings = [("requests", self._requests_reading(now))]
        if self.tokens is not None:
            remaining, reset = self.tokens.reading(now)
            readings.append(("tokens", (self.tokens.rate * 60, remaining, reset)))
        for name, reading in readings:
            if reading is not None:
                limit, remaining, reset = reading
                headers[f"x-ratelimit-limit-{name}"] = f"{limit:.0f}"
                headers[f"x-ratelimit-remaining-{name}"] = f"{remaining:.0f}"
                headers[f"x-ratelimit-reset-{name}"] = _duration(reset)
        return headers

    def error_reply(
        self,
        status: int,
        message: str,
        *,
        retry_after: float | None = None,
        param: str | None = None,
        code: str | None = None,
    ) -> Reply:
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        return Reply.json(
            status,
            {
                "error": {
                    "message": message,
                    "type": "invalid_request_error" if status < 500 else "server_error",
                    "param": param,
                    "code": code,
                }
            },
            headers,
        )

    # --- reasoning models: named here, they take `reasoning_effort` (chat completions) or
    # `reasoning: {effort}` (Responses), refuse `max_tokens` and a temperature other than 1,
    # and think: `REASONING_TOKENS[effort]` tokens more in the usage, and a reasoning item
    # (its summary `THOUGHT`) in a Responses answer

    reasoning_models: tuple[str, ...] = ("o9",)
    EFFORTS = ("minimal", "low", "medium", "high")
    REASONING_TOKENS: ClassVar[dict[str, int]] = {
        "minimal": 8,
        "low": 32,
        "medium": 128,
        "high": 512,
    }
    THOUGHT = "SECRET-REASONING: the child may be at risk, so"

    def _reasoning_refusal(self, body: dict[str, Any], effort: Any) -> Reply | None:
        """What OpenAI answers a request its model cannot take, or None."""
        if body["model"] not in self.reasoning_models:
            if effort is not None:
                return self.error_reply(
                    400,
                    "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
                    param="reasoning_effort",
                    code="unsupported_parameter",
                )
            return None
        if "max_tokens" in body:
            return self.error_reply(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.",
                param="max_tokens",
                code="unsupported_parameter",
            )
        if body.get("temperature", 1) != 1:
            return self.error_reply(
                400,
                f"Unsupported value: 'temperature' does not support {body['temperature']} "
                "with this model. Only the default (1) value is supported.",
                param="temperature",
                code="unsupported_value",
            )
        if effort is not None and effort not in self.EFFORTS:
            return self.error_reply(
                400,
                f"Invalid value: '{effort}'. Supported values are: 'minimal', 'low', "
                "'medium', and 'high'.",
                param="reasoning_effort",
                code="invalid_value",
            )
        return None

    def _reasoning(self, body: dict[str, Any], effort: Any) -> int:
        """The reasoning tokens of an answer to `body`."""
        return (
            self.REASONING_TOKENS[effort or "medium"]
            if body["model"] in self.reasoning_models
            else 0
        )

    def _authorized(self, rec: Recorded) -> Reply | None:
        auth = rec.headers.get("authorization")
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            return self.error_reply(401, f"Incorrect API key provided: {auth}")
        return None

    def handle(self, rec: Recorded, *, invalid: bool) -> Reply:
        if rec.path.startswith(("/v1/files", "/v1/batches")):
            return self._batch_api(rec)
        if rec.method == "POST" and rec.path == "/v1/responses":
            return self._authorized(rec) or self._responses(rec, invalid=invalid)
        if rec.method != "POST" or rec.path != "/v1/chat/completions":
            return self.error_reply(404, f"no route {rec.method} {rec.path}")
        if (refused := self._authorized(rec)) is not None:
            return refused
        body = rec.body
        if not isinstance(body, dict) or "messages" not in body or "model" not in body:
            return self.error_reply(400, "model and messages are required")
        effort = body.get("reasoning_effort")
        if (refused := self._reasoning_refusal(body, effort)) is not None:
            return refused
        fmt = body.get("response_format") or {}
        structured = fmt.get("type") == "json_schema"
        answer = self._next_answer(rec, structured=structured, invalid=invalid)
        message: dict[str, Any] = {"role": "assistant"}
        finish = "stop"
        if isinstance(answer, Ended):
            text = answer.text
            finish = answer.reason
            message.update(content=None if answer.refusal else text, refusal=answer.refusal)
        else:
            text = answer if isinstance(answer, str) else json.dumps(answer)
            message["content"] = text
        if self.tokens is not None:
            with self.lock:
                self.tokens.debit(_tokens(text), time.time())
        cached = self._cached(body["messages"])
        reasoning = self._reasoning(body, effort)
        out = _tokens(text) + reasoning
        self.bill(_tokens(body["messages"]) - cached, out, 0, cached, reasoning)
        return Reply.json(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:20]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": finish,
                    }
                ],
                "usage": {
                    "prompt_tokens": _tokens(body["messages"]),
                    # the reasoning tokens are a part of the completion's
                    "completion_tokens": out,
                    "total_tokens": _tokens(body["messages"]) + out,
                    # OpenAI caches prompts of 1,024 tokens or more by itself, in steps of
                    # 128: `cached_share` of such a prompt is served from its cache here
                    "prompt_tokens_details": {"cached_tokens": cached},
                    "completion_tokens_details": {"reasoning_tokens": reasoning},
                },
            },
        )

    # the chat-completions fields the Responses API does not know
    NOT_RESPONSES = ("messages", "max_tokens", "max_completion_tokens", "response_format",
                     "reasoning_effort")  # fmt: skip

    def _responses(self, rec: Recorded, *, invalid: bool) -> Reply:
        """`POST /v1/responses`: `input` (and `instructions`) in, a response whose `output`
        holds a reasoning item (a reasoning model's) and the message."""
        body = rec.body
        if not isinstance(body, dict) or "input" not in body or "model" not in body:
            return self.error_reply(400, "Missing required parameter: 'input'.", param="input")
        for name in self.NOT_RESPONSES:
            if name in body:
                return self.error_reply(
                    400, f"Unknown parameter: '{name}'.", param=name, code="unknown_parameter"
                )
        effort = (body.get("reasoning") or {}).get("effort")
        if (refused := self._reasoning_refusal(body, effort)) is not None:
            return refused
        fmt = (body.get("text") or {}).get("format") or {}
        answer = self._next_answer(
            rec, structured=fmt.get("type") == "json_schema", invalid=invalid
        )
        status, details = "completed", None
        content: list[dict[str, Any]] = []
        if isinstance(answer, Ended):
            text = answer.text
            if answer.refusal:
                content.append({"type": "refusal", "refusal": answer.refusal})
            elif answer.reason in ("length", "content_filter"):
                status = "incomplete"
                reason = "max_output_tokens" if answer.reason == "length" else answer.reason
                details = {"reason": reason}
        else:
            text = answer if isinstance(answer, str) else json.dumps(answer)
        if not content:
            content.append({"type": "output_text", "text": text, "annotations": []})
        output: list[dict[str, Any]] = []
        reasoning = self._reasoning(body, effort)
        if reasoning:
            output.append({"type": "reasoning", "id": f"rs_{uuid.uuid4().hex[:20]}",
                           "summary": [{"type": "summary_text", "text": self.THOUGHT}]})  # fmt: skip
        output.append({"type": "message", "id": f"msg_{uuid.uuid4().hex[:20]}",
                       "status": status, "role": "assistant", "content": content})  # fmt: skip
        tin, out = _tokens([body.get("instructions"), body["input"]]), _tokens(text) + reasoning
        self.bill(tin, out, reasoning=reasoning)
        return Reply.json(
            200,
            {
                "id": f"resp_{uuid.uuid4().hex[:20]}",
                "object": "response",
                "created_at": time.time(),
                "status": status,
                "incomplete_details": details,
                "model": body["model"],
                "output": output,
                "usage": {
                    "input_tokens": tin,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": out,
                    "output_tokens_details": {"reasoning_tokens": reasoning},
                    "total_tokens": tin + out,
                },
            },
        )


@dataclass
class SessionLog:
    age: int | None = None
    restored: list[dict[str, str]] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    ages: list[int] = field(default_factory=list)


class ChatEndpointServer(LoopbackServer):
    """The MyDD chat service: per-session history kept on the server."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.sessions: dict[str, SessionLog] = {}

    def handle(self, rec: Recorded, *, invalid: bool) -> Reply:
        body = rec.body if isinstance(rec.body, dict) else {}
        if rec.method == "POST" and rec.path == "/restore_session_memory":
            sid, msgs, age = body.get("session_id"), body.get("messages"), body.get("age")
            if not isinstance(sid, str) or not isinstance(msgs, list) or not isinstance(age, int):
                return self.error_reply(422, "session_id, messages and age are required")
            with self.lock:
                log = self.sessions.setdefault(sid, SessionLog())
                log.restored.extend(msgs)
                log.age = age
            return Reply.json(200, {"status": "ok"})
        if rec.method == "POST" and rec.path == "/query_chat_langchain_mem":
            sid = rec.query.get("session_id")
            prompt, age = body.get("prompt"), body.get("age")
            if not sid or not isinstance(prompt, str) or not isinstance(age, int):
                return self.error_reply(422, "session_id, prompt and age are required")
            with self.lock:
                log = self.sessions.setdefault(sid, SessionLog())
                log.prompts.append(prompt)
                log.ages.append(age)
                turn = len(log.prompts)
                reply = f"[{sid}] turn {turn}, age {age}: I hear you say {prompt!r}"
                log.replies.append(reply)
            if invalid:
                return Reply.json(200, {"answer": reply})
            return Reply.json(200, {"response": reply})
        return self.error_reply(404, f"no route {rec.method} {rec.path}")


SERVERS: dict[str, type[LoopbackServer]] = {
    "anthropic": AnthropicServer,
    "openai": OpenAIServer,
    "chat-endpoint": ChatEndpointServer,
}


S = TypeVar("S", bound=LoopbackServer)


class Servers:
    """The servers one test starts (`serve(AnthropicServer, latency=0.1)` gives it started);
    `stop_all` stops every one of them, whatever the test did (tests/conftest.py's `serve`
    fixture calls it after the test)."""

    def __init__(self) -> None:
        self.started: list[LoopbackServer] = []

    def __call__(self, cls: type[S], /, **kw: Any) -> S:
        server = cls(**kw)
        self.started.append(server)
        return server.start()

    def stop_all(self) -> None:
        while self.started:
            self.started.pop().stop()
