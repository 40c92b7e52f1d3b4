"""Any OpenAI-compatible `/chat/completions` endpoint (OpenAI, OpenRouter, vLLM, Ollama,
llama.cpp, LM Studio) over aiohttp, its Batch API too; with `api: responses`, the
Responses API (`/responses`) for every call, batches included.

A reasoning model's `reasoning_effort` goes as chat completions' field of that name, or as
the Responses API's `reasoning: {effort}`; what it reasoned never comes into an answer
(chat completions' `reasoning`/`reasoning_content` of local servers, a Responses answer's
reasoning items), only its count: `reasoning_tokens`, a part of the output tokens.

Structured answers ask for `response_format: {type: json_schema, ...}` with
`strict: false` (pydantic's schemas carry keywords strict mode rejects), or as the model's
`structured_output` says (kora.llm.providers.structured: json_object, Ollama's format, a tool call,
the prompt); the answer is validated by the client anyway. An error status is classed by
kora.llm.wire.faults: a refusal of the request itself is a configuration error. No API key is
needed for a local server: without one the Authorization header is left out. The answer's
rate-limit headers (`x-ratelimit-*`) come with it and with a 429.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import aiohttp
import orjson

from kora.llm.base import FinishReason, ProviderError, Request, Response, finish_reasons
from kora.llm.headers import from_openai
from kora.llm.masking import redact
from kora.llm.providers import structured
from kora.llm.retry import parse_retry_after
from kora.llm.settings.config import ModelConfig
from kora.llm.wire import aio
from kora.llm.wire.faults import refusal, server_reason
from kora.llm.wire.http import bearer

# a batch's statuses once it is over
_BATCH_ENDED = ("completed", "failed", "expired", "cancelled")

# chat-completions' finish_reason in the project's words (kora.llm.base.FinishReason)
# (and the Responses API's status, or why it is incomplete)
_FINISH = finish_reasons(
    {
        "stop": ("stop", "tool_calls", "function_call", "completed"),
        "max_tokens": ("length", "max_output_tokens"),
        "content_filter": ("content_filter",),
    }
)


def _answer(
    data: Any, text: str, finish: FinishReason, said: Any, given: str, made: str
) -> Response:
    """An answer with its token counts from its `usage` (`given`, `made`: the API's words
    for the prompt's and the answer's): cached tokens apart from the input, at their own
    price (the token limit counts the whole prompt), the reasoning tokens within the
    output; and the model id the server says answered (a dated snapshot behind an alias)."""
    usage = data.get("usage")

    def count(key: str, detail: str | None = None) -> int:
        found = usage.get(key) if isinstance(usage, dict) else None
        if detail is not None:
            found = found.get(detail) if isinstance(found, dict) else None
        return int(found or 0)

    whole, read = count(f"{given}_tokens"), count(f"{given}_tokens_details", "cached_tokens")
    served = data.get("model")
    return Response(
        text=text,
        input_tokens=whole - read,
        output_tokens=count(f"{made}_tokens"),
        reasoning_tokens=count(f"{made}_tokens_details", "reasoning_tokens"),
        cache_read_tokens=read,
        limit_input_tokens=whole,
        finish_reason=finish,
        meta={"finish_reason": said, **({"model": served} if isinstance(served, str) else {})},
    )


def _completion(data: Any) -> Response:
    """A chat completion's answer."""
    choice = data["choices"][0]
    message = choice["message"]
    text = message.get("content") or structured.tool_arguments(message)
    refused = text is None and bool(message.get("refusal"))
    if text is None:
        text = message.get("refusal") or ""
    if not isinstance(text, str):
        raise TypeError("content is not a string")
    said = choice.get("finish_reason")
    finish = "refusal" if refused else _FINISH.get(str(said), "other")
    return _answer(data, text, finish, said, "prompt", "completion")


def _response(data: Any) -> Response:
    """A Responses API answer: the text of its messages, its reasoning items left out."""
    parts = [c for item in data["output"] if item["type"] == "message" for c in item["content"]]
    text = "".join(c["text"] for c in parts if c["type"] == "output_text")
    refusal = "".join(c["refusal"] for c in parts if c["type"] == "refusal")
    said = (data.get("incomplete_details") or {}).get("reason") or data.get("status")
    finish = "refusal" if refusal and not text else _FINISH.get(str(said), "other")
    return _answer(data, text or refusal, finish, said, "input", "output")


class OpenAIProvider(aio.AioModel):
    """One configured model behind an OpenAI-compatible API: its calls and its Batch API's
    requests over aiohttp (kora.llm.wire.aio)."""

    def __init__(self, name: str, config: ModelConfig) -> None:
        super().__init__(name, config)
        # its API's path, as a batch names it
        self.endpoint = "/v1/responses" if config.api == "responses" else "/v1/chat/completions"
        self.url = self.base_url + self.endpoint.removeprefix("/v1")
        self.tokens_field = config.token_field()

    def _session_headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", **bearer(self._read_key())}

    def _body(self, request: Request) -> dict[str, Any]:
        turns = [{"role": m.role, "content": m.content} for m in request.messages]
        effort, bounds = self.config.reasoning_effort, self.config.schema_bounds
        body: dict[str, Any] = {"model": self.model}
        if self.config.api == "responses":
            # kora keeps every answer itself: none is kept on the provider's side
            body.update(input=turns, max_output_tokens=request.max_tokens, store=False)
            if request.system:
                body["instructions"] = request.system
            if effort is not None:
                body["reasoning"] = {"effort": effort}
            if request.schema is not None:
                name, doc = structured.sent_schema(request.schema, bounds)
                form = {"type": "json_schema", "name": name, "schema": doc, "strict": False}
                body["text"] = {"format": form}
        else:
            system = [{"role": "system", "content": request.system}] if request.system else []
            body.update(messages=system + turns)
            body[self.tokens_field] = request.max_tokens
            if effort is not None:
                body["reasoning_effort"] = effort
            if request.schema is not None:
                structured.shape(body, request.schema, self.config.structured_mode, bounds)
        if request.temperature is not None:
            body["temperature"] = request.temperature
        return {**body, **(self.config.params or {})}

    async def generate(self, request: Request) -> Response:
        body, url = self._body(request), self.url
        # Ollama's own chat API takes the schema as `format` (kora.llm.providers.structured)
        native = request.schema is not None and self.config.structured_output == "ollama_format"
        if native:
            body, url = structured.ollama_body(body), structured.ollama_url(self.base_url)
        answer = await self._send(url, orjson.dumps(body))
        if answer.status >= 400:
            raise self._status_error(answer)
        try:
            data = orjson.loads(answer.body)
        except orjson.JSONDecodeError:
            data = None
        return self._parse(structured.from_ollama(data) if native else data, answer)

    def _parse(self, data: Any, resp: aio.Answer | None) -> Response:
        """An answer of its API (the body of a direct answer or of a batch's line)."""
        try:
            answer = (_response if self.config.api == "responses" else _completion)(data)
            limits = None if resp is None else from_openai(resp.headers, time.time())
            return replace(answer, limits=limits)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            shown = (resp.body if resp is not None else orjson.dumps(data)).decode(errors="replace")
            status = f"HTTP {resp.status}" if resp is not None else "batch answer"
            raise ProviderError(
                f"{self.label}: {status} with a malformed body ({redact(shown, self._key)[:120]!r})",
                retryable=True,
            ) from None

    # --- OpenAI's Batch API, for kora.llm.providers.batch: the requests as a JSONL file
    # (`POST /files`, purpose `batch`), a batch over it (`POST /batches`, 24 h window),
    # polled (`GET /batches/{id}`), the answers read from its output and error files
    # (`GET /files/{id}/content`), one line per request, matched by `custom_id`

    async def _batch_call(self, path: str, data: Any = None, **kw: Any) -> bytes:
        """The body of one request's answer (a POST when it has `data`, else a GET); no size
        limit: a batch's files hold many answers (each is held to it on its own)."""
        method = "GET" if data is None else "POST"
        resp = await self._send(f"{self.base_url}{path}", data, method=method, whole=True, **kw)
        if resp.status >= 400:
            raise ProviderError(
                f"{self.label}: HTTP {resp.status} from {path}: {redact(resp.text, self._key)[:200]}",
                status=resp.status,
                retry_after=parse_retry_after(resp.headers),
            )
        return resp.body

    async def batch_submit(self, items: list[tuple[str, Request]]) -> str:
        lines = b"".join(
            orjson.dumps(
                {"custom_id": cid, "method": "POST", "url": self.endpoint, "body": self._body(r)}
            )
            + b"\n"
            for cid, r in items
        )
        form = aiohttp.MultipartWriter("form-data")
        form.append("batch").set_content_disposition("form-data", name="purpose")
        file = form.append(lines, {"Content-Type": "application/jsonl"})
        file.set_content_disposition("form-data", name="file", filename="kora-batch.jsonl")
        # its own Content-Type (the multipart's boundary), not the session's JSON
        upload = await self._batch_call("/files", form, headers={"Content-Type": form.content_type})
        made = {
            "input_file_id": orjson.loads(upload)["id"],
            "endpoint": self.endpoint,
            "completion_window": "24h",
        }
        return str(orjson.loads(await self._batch_call("/batches", orjson.dumps(made)))["id"])

    async def batch_ended(self, batch_id: str) -> bool:
        batch = orjson.loads(await self._batch_call(f"/batches/{batch_id}"))
        return batch.get("status") in _BATCH_ENDED

    async def batch_results(self, batch_id: str) -> dict[str, Response | ProviderError]:
        batch = orjson.loads(await self._batch_call(f"/batches/{batch_id}"))
        out: dict[str, Response | ProviderError] = {}
        for key in ("output_file_id", "error_file_id"):
            file_id = batch.get(key)
            if not file_id:
                continue
            content = await self._batch_call(f"/files/{file_id}/content")
            for line in content.splitlines():
                if not line.strip():
                    continue
                row = orjson.loads(line)
                cid = str(row.get("custom_id"))
                response = row.get("response") or {}
                error = row.get("error") or {}
                status = response.get("status_code")
                if status == 200 and isinstance(response.get("body"), dict):
                    try:
                        resp = self._parse(response["body"], None)
                    except ProviderError as exc:
                        out[cid] = exc
                        continue
                    out[cid] = replace(resp, meta={**resp.meta, "batch": batch_id})
                elif error.get("code") in ("batch_expired", "batch_cancelled"):
                    out[cid] = ProviderError(
                        f"{self.label}: batch request {error['code']}", retryable=True
                    )
                else:
                    message = error.get("message") or str(response.get("body"))[:200]
                    out[cid] = ProviderError(
                        f"{self.label}: batch request failed: {redact(str(message), self._key)[:200]}",
                        status=status if isinstance(status, int) else None,
                        retryable=not isinstance(status, int) or status >= 500 or status == 429,
                    )
        if batch.get("status") in ("failed", "expired", "cancelled") and not out:
            raise ProviderError(
                f"{self.label}: batch {batch_id} {batch.get('status')}", retryable=True
            )
        return out

    def _status_error(self, resp: aio.Answer) -> ProviderError:
        return refusal(
            self.label,
            self.name,
            resp.status,
            server_reason(resp.body, resp.reason),
            key=self._key,
            key_env=self.key_env,
            mode=self.config.structured_output,
            retry_after=parse_retry_after(resp.headers),
            limits=from_openai(resp.headers, time.time()),
        )
