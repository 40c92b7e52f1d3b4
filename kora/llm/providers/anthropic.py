"""Anthropic Messages API: each call a POST to `/v1/messages` over aiohttp, Message
Batches through the official SDK.

A call is one JSON request and one JSON answer, which the provider reads itself (it always
has: the body up to the size limit, then orjson). The SDK's request path (its options
model, header merging, URL joining, an httpx request object) took a third of the broker's
CPU at a top-tier limit (bench/README.md, "Where the CPU goes"), so the calls go out
directly with the headers the API requires (`x-api-key`, `anthropic-version`); batches, a
handful of requests a run, keep the SDK.

Structured answers use forced tool use: one tool whose `input_schema` is the pydantic
type's JSON Schema and `tool_choice` naming it; the tool input comes back as the JSON text
of the response. With extended thinking (`thinking_tokens`) the API refuses a forced tool:
the tool is offered (`tool_choice: auto`), and an answer in text instead is read and
checked all the same. Thinking blocks are never read into an answer: what the target
thought reaches no one, and a conversation carries on from its replies' text, which the
API allows (it asks for the thinking back only after a tool call). The SDK's own retries
are off (`max_retries=0`): `kora.llm.retry` retries every provider the same way, and
`kora.llm.limits` must see every 429.

The endpoint is the model's `base_url`, else `ANTHROPIC_BASE_URL`, else the public API,
given with or without the trailing `/v1` (the SDK's form, or the AI SDK's); the key comes
from `api_key_env` (default `ANTHROPIC_API_KEY`). `temperature` is sent as a body field
(recent SDKs dropped the argument). A timeout or a dropped connection is a status-less,
retryable `ProviderError`; error messages name the model and status and never the key.
The answer's rate-limit headers (`anthropic-ratelimit-*`) come with it and with a 429.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson

from kora.llm.base import ProviderError, Request, Response, answer_schema, finish_reasons
from kora.llm.headers import from_anthropic
from kora.llm.masking import redact
from kora.llm.providers import prompt_cache
from kora.llm.retry import parse_retry_after
from kora.llm.settings.config import ModelConfig
from kora.llm.wire import aio
from kora.llm.wire.faults import refusal
from kora.llm.wire.http import LoopBound

if TYPE_CHECKING:
    import anthropic

# the Messages API's stop_reason in the project's words (kora.llm.base.FinishReason)
_FINISH = finish_reasons(
    {
        "stop": ("end_turn", "stop_sequence", "tool_use"),
        "max_tokens": ("max_tokens", "model_context_window_exceeded"),
        "refusal": ("refusal",),
    }
)


def _served(model: object) -> dict[str, str]:
    """The model id the answer says served it (a dated snapshot where the config names an
    alias): the manifest counts answers by it."""
    return {"model": model} if isinstance(model, str) and model else {}


# The Messages API rejects a turn that is empty or only whitespace; a target that answered
# nothing is shown this instead in the later turns (its transcript keeps the reply as given).
EMPTY_TURN = "(no reply)"


class AnthropicProvider(aio.AioModel):
    """One configured Anthropic model: its calls over aiohttp, its Message Batches through
    the SDK's client (one for each event loop)."""

    API_VERSION = "2023-06-01"

    def __init__(self, name: str, config: ModelConfig) -> None:
        super().__init__(name, config)
        self._clients = LoopBound(self._new_client, lambda client: client.close())

    def normalise_url(self, url: str) -> str:
        """The SDK appends `/v1/messages`; accept a base given with `/v1` (the AI SDK's
        form)."""
        url = url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url

    def _new_client(self) -> anthropic.AsyncAnthropic:
        """The SDK's client, for Message Batches (imported only for them: importing the
        SDK costs a process a second or two of CPU)."""
        import anthropic

        return anthropic.AsyncAnthropic(
            api_key=self._read_key() or "",
            base_url=self.base_url,
            max_retries=0,
            timeout=self.timeout,
            http_client=anthropic.DefaultAioHttpClient(timeout=self.timeout),
        )

    def _session_headers(self) -> dict[str, str]:
        return {
            "x-api-key": self._read_key() or "",
            "anthropic-version": self.API_VERSION,
            "content-type": "application/json",
            "accept": "application/json",
            "user-agent": "kora",
        }

    def _params(self, request: Request) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": [
                {"role": m.role, "content": m.content if m.content.strip() else EMPTY_TURN}
                for m in request.messages
            ],
        }
        if request.system:
            params["system"] = request.system
        if request.temperature is not None:
            params["temperature"] = request.temperature
        thinking = self.config.thinking_tokens
        if thinking is not None:
            params["thinking"] = {"type": "enabled", "budget_tokens": thinking}
        if request.schema is not None:
            tool, schema = answer_schema(request.schema)
            params["tools"] = [
                {
                    "name": tool,
                    "description": f"Record the answer as one {tool} object.",
                    "input_schema": schema,
                }
            ]
            forced = {"type": "tool", "name": tool}
            params["tool_choice"] = {"type": "auto"} if thinking is not None else forced
        params.update(self.config.params or {})
        if self.config.prompt_cache:
            least = self.config.kind.cache_minimum(self.model)
            params = prompt_cache.mark(params, ttl=self.config.cache_ttl, minimum=least)
        return params

    async def generate(self, request: Request) -> Response:
        # redirects followed, as the SDK followed them
        answer = await self._send(
            f"{self.base_url}/v1/messages", orjson.dumps(self._params(request)), redirects=True
        )
        headers, body = answer.headers, answer.body
        if answer.status >= 400:
            raise self._refused(answer.status, answer.reason, headers, body)
        try:
            return self._response(orjson.loads(body), request, from_anthropic(headers))
        except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError):
            shown = redact(body.decode(errors="replace"), self._key)[:200]
            raise ProviderError(
                f"{self.label}: malformed response body ({shown!r})", retryable=True
            ) from None

    def _response(self, msg: Any, request: Request | None, limits: Any = None) -> Response:
        """A Messages API answer (its JSON) as a Response (without its request: the
        tool_use block if there is one)."""
        if not isinstance(msg, dict):
            raise TypeError("not a message object")
        content = msg.get("content")
        if not isinstance(content, list):
            raise ProviderError(f"{self.label}: response without content", retryable=True)

        def field(o: Any, k: str) -> Any:
            return o.get(k) if isinstance(o, dict) else None

        text = ""
        if request is None or request.schema is not None:
            for block in content:
                if field(block, "type") == "tool_use":
                    text = json.dumps(field(block, "input"), ensure_ascii=False)
                    break
        if not text:
            text = "".join(
                str(field(b, "text") or "") for b in content if field(b, "type") == "text"
            )
        usage = msg.get("usage")
        stop = msg.get("stop_reason")
        return Response(
            text=text,
            input_tokens=int(field(usage, "input_tokens") or 0),
            output_tokens=int(field(usage, "output_tokens") or 0),
            cache_write_tokens=int(field(usage, "cache_creation_input_tokens") or 0),
            cache_read_tokens=int(field(usage, "cache_read_input_tokens") or 0),
            # the input-token limit counts cache writes, not cache reads
            limit_input_tokens=int(field(usage, "input_tokens") or 0)
            + int(field(usage, "cache_creation_input_tokens") or 0),
            finish_reason=_FINISH.get(str(stop), "other"),
            meta={"stop_reason": stop, **_served(msg.get("model"))},
            limits=limits,
        )

    # --- Message Batches (kora.llm.providers.batch) -----------------------------------------------

    @contextlib.contextmanager
    def _sdk_errors(self, what: str) -> Iterator[None]:
        """The SDK's refusals and failed connections, as the project's errors (`what`: what
        a failed connection left undone)."""
        import anthropic

        try:
            yield
        except anthropic.APIStatusError as exc:
            raise self._status_error(exc) from None
        except (anthropic.APIConnectionError, anthropic.APITimeoutError) as exc:
            raise ProviderError(f"{self.label}: {what} ({type(exc).__name__})") from None

    async def batch_submit(self, items: list[tuple[str, Request]]) -> str:
        """Send requests as one Message Batch; its id."""
        client = self._clients.get()
        requests = [{"custom_id": cid, "params": self._params(r)} for cid, r in items]
        with self._sdk_errors("batch not sent"):
            batch = await client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        return str(batch.id)

    async def batch_ended(self, batch_id: str) -> bool:
        client = self._clients.get()
        with self._sdk_errors("batch not read"):
            batch = await client.messages.batches.retrieve(batch_id)
        return str(batch.processing_status) == "ended"

    async def batch_results(self, batch_id: str) -> dict[str, Response | ProviderError]:
        """Each request's answer, or its own error (errored, expired, canceled)."""
        client = self._clients.get()
        out: dict[str, Response | ProviderError] = {}
        with self._sdk_errors("batch results not read"):
            async for line in await client.messages.batches.results(batch_id):
                result = line.result
                cid = str(line.custom_id)
                kind = str(result.type)
                if kind == "succeeded":
                    # a forced tool call answers with its tool_use block, a text call
                    # with text: the answer says which it was
                    message = result.message.model_dump()  # type: ignore[union-attr]
                    resp = self._response(message, None)
                    out[cid] = replace(resp, meta={**resp.meta, "batch": batch_id})
                elif kind == "errored":
                    err = getattr(getattr(result, "error", None), "error", None)
                    etype = str(getattr(err, "type", "api_error"))
                    status = 400 if etype == "invalid_request_error" else 500
                    out[cid] = ProviderError(
                        f"{self.label}: batch request failed: {etype}: "
                        f"{redact(str(getattr(err, 'message', '')), self._key)[:200]}",
                        status=status,
                    )
                else:  # expired or canceled: asked again, in a new batch
                    out[cid] = ProviderError(f"{self.label}: batch request {kind}", retryable=True)
        return out

    def _status_error(self, exc: anthropic.APIStatusError) -> ProviderError:
        """A refusal the SDK raised (Message Batches)."""
        reason = exc.response.reason_phrase or ""
        return self._refused(exc.status_code, reason, exc.response.headers, exc.body)

    def _refused(self, status: int, reason: str, headers: Any, body: object) -> ProviderError:
        """A refusal (4xx, 5xx) from its status, headers and body (a call's JSON bytes, or
        the SDK's reading of them)."""
        if isinstance(body, bytes):
            try:
                body = orjson.loads(body)
            except orjson.JSONDecodeError:
                body = None
        err = body.get("error") if isinstance(body, dict) else None
        detail = str(err.get("message") or err.get("type") or "") if isinstance(err, dict) else ""
        return refusal(
            self.label,
            self.name,
            status,
            detail or reason,
            key=self._key,
            key_env=self.key_env,
            retry_after=parse_retry_after(headers),
            limits=from_anthropic(headers),
        )

    async def aclose(self) -> None:
        await self._clients.aclose()
        await super().aclose()
