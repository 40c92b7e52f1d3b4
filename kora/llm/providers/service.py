"""A chat service as a target, driven by its description in config (kora.llm.settings.service_config).

One `ServiceSession` per test: `open` (when the service starts sessions; its answer may
give the session id or say the app is blocked), `memory` (when the scenario has one),
then one `turn` request per child message, and `close` at the end. Requests go through
the same limiter and retry layer as the LLM providers; a turn retried after a dropped
connection may reach a stateful service twice (the reference behaves the same way).
Secrets: `${NAME}` in a header is read from the environment when the request is sent,
and is masked (kora.llm.masking, in every form) in every error, in `kora ping`'s echo of
the request and in the replies themselves: a service that echoes its token back puts
`****` in the transcript, and the turn is marked `masked`.

Each request is held to the model's deadline and size limit (kora.llm.settings.bounds). A 3xx
answer is a failed attempt naming its Location unless the model sets `follow_redirects:
true`, and so is a turn whose whole body is the reply but that has no body: neither is
taken for an empty reply.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin
from uuid import uuid4

import aiohttp
import orjson

from kora.llm.base import (
    BlockedError,
    ChatMessage,
    ProviderError,
    Response,
    clean_text,
    is_retryable,
)
from kora.llm.limits import Limiter, limiter_for
from kora.llm.masking import Masker, cut, redact
from kora.llm.retry import RetryPolicy, attempts, parse_retry_after
from kora.llm.settings.bounds import DEFAULT_TIMEOUT, deadline
from kora.llm.settings.config import ModelConfig
from kora.llm.settings.service_config import (
    AGE_FOR_RANGE,
    ENV_REF,
    RequestSpec,
    environment,
    find,
    is_single_expression,
    spec_for,
    value_problem,
)
from kora.llm.wire.aio import Answer, env_proxy, new_session, send
from kora.llm.wire.http import LoopBound, bearer, read_key


def new_session_id() -> str:
    return f"{uuid4()}_{uuid4()}"


@dataclass
class Sent:
    """A request as it went out, secrets masked: what `kora ping` shows."""

    method: str
    url: str
    headers: dict[str, str]
    body: str | None
    status: int | None = None
    answer: str | None = None
    seconds: float | None = None


@dataclass
class ServiceSession:
    """One test's conversation with the service."""

    target: ServiceTarget
    variables: dict[str, object]
    turns: int = 0
    closed: bool = False

    @property
    def session_id(self) -> str:
        return str(self.variables["session_id"])

    async def reply(self, messages: list[ChatMessage]) -> Response:
        """One turn: the newest user message of `messages` (and the rest, for a stateless
        service whose template sends `messages`)."""
        message = next((m.content for m in reversed(messages) if m.role == "user"), None)
        if message is None:
            raise ValueError(f"{self.target.label}: a turn needs a user message")
        self.turns += 1
        vars_ = dict(
            self.variables,
            message=message,
            messages=[{"role": m.role, "content": m.content} for m in messages],
            turn=self.turns,
        )
        spec = self.target.spec.turn
        started = time.monotonic()
        data, raw = await self.target.request("turn", spec, vars_)
        latency = time.monotonic() - started
        text = raw if spec.reply is None else str(find(data, spec.reply))
        text, masked = self.target.masker().masked(clean_text(text))
        meta: dict[str, object] = {"session_id": self.session_id, "latency": latency}
        if masked:
            meta["masked"] = True
        tokens = {
            k: find(data, p)
            for k, p in (("input", spec.input_tokens), ("output", spec.output_tokens))
            if p
        }
        return Response(
            text=text,
            input_tokens=_count(tokens.get("input")),
            output_tokens=_count(tokens.get("output")),
            meta=meta,
        )

    async def close(self, outcome: str = "completed") -> None:
        """End the session on the service (when it has a `close`); never fails the test."""
        spec = self.target.spec.close
        if spec is None or self.closed:
            return
        self.closed = True
        # best effort, as the canonical runners: the test's result stands
        with contextlib.suppress(ProviderError):
            await self.target.request("close", spec, dict(self.variables, outcome=outcome))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class ServiceTarget:
    """An `http`, `chat-endpoint` or `app-runner` model: opens sessions and carries
    their requests."""

    def __init__(
        self,
        name: str,
        config: ModelConfig,
        *,
        limiter: Limiter | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        if not config.kind.described and not config.base_url:
            raise ValueError(f"model {name!r}: a {config.provider} model needs base_url")
        self.name = name
        self.config = config
        self.spec = spec_for(config.provider, config.http)
        self.base = (config.base_url or "").rstrip("/")
        self.label = f"model {name!r} ({self.base or config.provider})"
        self.source = (config.endpoint() or ("", "base_url"))[1]  # what set the URL
        self.limiter = limiter or limiter_for(name, config, None)
        self.retry_policy = retry_policy or RetryPolicy()
        self.timeout = config.timeout or DEFAULT_TIMEOUT
        self.run_id = str(uuid4())
        self.env = environment()
        self._sessions = LoopBound(self._new_session, lambda s: s.close())
        self._key: str | None = None
        self.secrets: set[str] = set()
        self.sent: list[Sent] = []  # kept only when `record` is set (kora ping)
        self.record = False

    def _new_session(self) -> aiohttp.ClientSession:
        env, needed = self.config.api_key()
        self._key = read_key(env, self.label, required=needed) if env else None
        if self._key:
            self.secrets.add(self._key)
        return new_session(self.timeout, bearer(self._key))

    def masker(self) -> Masker:
        return Masker({*self.secrets, self._key})

    def mask(self, text: str, limit: int | None = None) -> str:
        """`text` with every secret masked (then cut to `limit` characters) and control
        characters shown as escapes."""
        text = redact(self.masker().mask(text), None)
        return text if limit is None else cut(text, limit)

    async def open_session(
        self,
        age_range: str | None,
        memory: str | None = None,
        system: str = "",
        *,
        variant: str | None = None,
        test_key: str = "",
    ) -> ServiceSession:
        """A fresh session for one test; opened on the service and its memory restored
        when the description says how."""
        if age_range is None and "default" not in self.config.kind.variants:
            raise ValueError("a chat endpoint always receives an age: it cannot run `default`")
        age: int | None = None
        if age_range is not None:
            if age_range not in AGE_FOR_RANGE:
                raise ValueError(
                    f"unknown age range {age_range!r} (expected one of {', '.join(AGE_FOR_RANGE)})"
                )
            age = AGE_FOR_RANGE[age_range]
        variables: dict[str, object] = {
            "age": age,
            "age_range": age_range,
            "system": system,
            "variant": variant or ("child" if age_range else "default"),
            "memory": memory or "",
            "session_id": new_session_id(),
            "test_key": test_key or str(uuid4()),
            "run_id": self.run_id,
            "app": self.config.app,
            "message": "",
            "messages": [],
            "turn": 0,
        }
        session = ServiceSession(self, variables)
        if self.spec.open is not None:
            data, _ = await self.request("open", self.spec.open, variables)
            if self.spec.open.session_id:
                variables["session_id"] = str(find(data, self.spec.open.session_id))
        if memory and self.spec.memory is not None:
            await self.request("memory", self.spec.memory, variables)
        return session

    def render(
        self, value: object, variables: dict[str, object], where: str, *, url: bool = False
    ) -> Any:
        """A body or URL with its templates filled in (strictly). A single expression's
        value goes as it is: JSON in a body, text (or a number, as text) in a URL;
        anything else (a function, an iterator) is the config's error, named."""
        if isinstance(value, str):
            expr = is_single_expression(value)
            try:
                if expr is not None:
                    out = self.env.compile_expression(expr, undefined_to_none=False)(**variables)
                    problem = value_problem(out, url=url)  # raises for an undefined name
                    if problem is None:
                        return str(out) if url else out
                else:
                    return self.env.from_string(value).render(**variables)
            except Exception as exc:  # a template error is the config's, named with its place
                raise ProviderError(
                    f"{self.label}: {where}: {type(exc).__name__}: {exc}", retryable=False
                ) from None
            raise ProviderError(f"{self.label}: {where}: {value!r} {problem}", retryable=False)
        if isinstance(value, dict):
            return {k: self.render(v, variables, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [self.render(v, variables, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    def headers_for(self, spec: RequestSpec) -> tuple[dict[str, str], bool]:
        """The request's headers with `${NAME}` read from the environment; whether the
        body's content type is set by them."""
        out: dict[str, str] = {}
        for k, v in {**self.spec.headers, **spec.headers}.items():
            for name in ENV_REF.findall(v):
                if os.environ.get(name) is None:
                    raise ProviderError(
                        f"{self.label}: header {k}: environment variable {name} is not set",
                        retryable=False,
                    )
                self.secrets.add(os.environ[name])
            out[k] = ENV_REF.sub(lambda m: os.environ[m.group(1)], v)
        return out, any(k.lower() == "content-type" for k in out)

    async def request(
        self, step: str, spec: RequestSpec, variables: dict[str, object]
    ) -> tuple[object, str]:
        """One request of the session, with limits and retries: (JSON answer or None,
        answer text). A `blocked` field that is set raises BlockedError."""
        url = self.render(spec.url, variables, f"http.{step}.url", url=True)
        if not url.startswith(("http://", "https://")):
            url = urljoin(self.base + "/", url.lstrip("/"))
        body = self.render(spec.body, variables, f"http.{step}.body")
        headers, typed = self.headers_for(spec)
        content: bytes | None = None
        if isinstance(body, str):
            content = body.encode()
            if not typed:
                headers["Content-Type"] = "text/plain; charset=utf-8"
        elif body is not None:
            content = orjson.dumps(body)
            if not typed:
                headers["Content-Type"] = "application/json"

        async def once() -> tuple[object, str]:
            async with deadline(self.timeout, self.label):
                answer = await self._send(spec.method, url, content, headers)
                return self._read(step, spec, url, answer)

        async for attempt in attempts(should_retry=is_retryable, policy=self.retry_policy):
            async with attempt:
                return await self.limiter.call(once)
        raise AssertionError("unreachable: the attempts end in an answer or raise")

    async def _send(
        self, method: str, url: str, content: bytes | None, headers: dict[str, str]
    ) -> Answer:
        """One request, whatever its answer's status (kept as sent when `record`)."""
        started = time.monotonic()
        session = self._sessions.get()
        resp = await send(
            session,
            method,
            url,
            content,
            by=self,
            limit=self.config.max_reply_bytes,
            proxy=env_proxy(url),  # as the environment names it for this URL
            redirects=self.config.follow_redirects,
            headers=headers,
        )
        if self.record:
            self.sent.append(
                Sent(
                    method,
                    self.mask(url),
                    {
                        k: self.mask(v)
                        for k, v in {**dict(session.headers), **headers}.items()
                        if k.lower() in {h.lower() for h in headers} or k.lower() == "authorization"
                    },
                    None if content is None else self.mask(content.decode(errors="replace")),
                    resp.status,
                    self.mask(resp.text, 2000),
                    time.monotonic() - started,
                )
            )
        return resp

    def _key_variables(self, spec: RequestSpec) -> str:
        """' (check A, B)': the variables a refused credential came from (the model's key
        variable, its headers' `${NAME}`s), as a provider's 401 names its key's."""
        headers = " ".join({**self.spec.headers, **spec.headers}.values())
        names = [n for n in (self.config.api_key()[0], *ENV_REF.findall(headers)) if n]
        return f" (check {', '.join(dict.fromkeys(names))})" if names else ""

    def _read(self, step: str, spec: RequestSpec, url: str, resp: Answer) -> tuple[object, str]:
        """A request's answer as (JSON or None, text), checked here, inside the retries:
        an error status, an unfollowed redirect or a malformed answer is a failed attempt."""
        text = resp.text
        where = f"{step} ({spec.method} {self.mask(url)})"
        if resp.status >= 400:
            check = self._key_variables(spec) if resp.status in (401, 403) else ""
            raise ProviderError(
                f"{self.label}: HTTP {resp.status} from {where}: {self.mask(text, 200)}{check}",
                status=resp.status,
                retry_after=parse_retry_after(resp.headers),
            )
        if 300 <= resp.status < 400:
            raise ProviderError(
                f"{self.label}: HTTP {resp.status} from {where}, a redirect to "
                f"{self.mask(resp.headers.get('location', '(no Location)'), 300)}: "
                "not followed (set follow_redirects: true on the model to follow it)",
                status=resp.status,
                retryable=True,
            )
        if step == "turn" and spec.reply is None and not resp.body:
            raise ProviderError(
                f"{self.label}: HTTP {resp.status} from {where} with no body: "
                "no reply (the whole body is the reply)",
                retryable=True,
            )
        try:
            data = orjson.loads(resp.body) if resp.body else None
        except orjson.JSONDecodeError:
            data = None
        if spec.blocked and data is not None:
            reason = find(data, spec.blocked)
            if reason:
                raise BlockedError(self.label, self.mask(str(reason), 300))
        needs_json = spec.reply is not None or spec.session_id is not None
        if needs_json and not isinstance(data, (dict, list)):
            raise ProviderError(
                f"{self.label}: the {step} answer is not JSON ({self.mask(text, 120)!r})",
                retryable=True,
            )
        if spec.reply is not None and not isinstance(find(data, spec.reply), str):
            raise ProviderError(
                f"{self.label}: the {step} answer has no text at {spec.reply!r} "
                f"({self.mask(text, 160)!r})",
                retryable=True,
            )
        sid = find(data, spec.session_id) if spec.session_id is not None else "-"
        if not isinstance(sid, (str, int)) or isinstance(sid, bool) or sid == "":
            raise ProviderError(
                f"{self.label}: the {step} answer has no session id at "
                f"{spec.session_id!r} ({self.mask(text, 160)!r})",
                retryable=True,
            )
        return data, text

    async def aclose(self) -> None:
        await self._sessions.aclose()
