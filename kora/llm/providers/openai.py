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
        # its API's path, as a batch names it (kora.llm.providers.openai_batch)
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

    # --- the Batch API (kora.llm.providers.batch; the requests in kora.llm.providers.openai_batch) ---------

    async def batch_submit(self, items: list[tuple[str, Request]]) -> str:
        from kora.llm.providers import openai_batch

        return await openai_batch.submit(self, items)

    async def batch_ended(self, batch_id: str) -> bool:
        from kora.llm.providers import openai_batch

        return await openai_batch.ended(self, batch_id)

    async def batch_results(self, batch_id: str) -> dict[str, Response | ProviderError]:
        from kora.llm.providers import openai_batch

        return await openai_batch.results(self, batch_id)

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
