"""Any OpenAI-compatible `/chat/completions` endpoint (OpenAI, OpenRouter, vLLM, Ollama,
llama.cpp, LM Studio) over aiohttp (the Batch API over httpx).

Structured answers ask for `response_format: {type: json_schema, ...}` with
`strict: false` (pydantic's schemas carry keywords strict mode rejects), or as the model's
`structured_output` says (kora.llm.structured: json_object, Ollama's format, a tool call,
the prompt); the answer is validated by the client anyway. An error status is classed by
kora.llm.faults: a refusal of the request itself is a configuration error. No API key is
needed for a local server: without one the Authorization header is left out. The answer's
rate-limit headers (`x-ratelimit-*`) come with it and with a 429.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import orjson

from kora.llm import aio, structured
from kora.llm.base import ProviderError, Request, Response, finish_reasons
from kora.llm.config import ModelConfig
from kora.llm.faults import refusal, server_reason
from kora.llm.headers import from_openai
from kora.llm.http import bearer, new_client
from kora.llm.masking import redact
from kora.llm.retry import parse_retry_after

# chat-completions' finish_reason in the project's words (kora.llm.base.FinishReason)
_FINISH = finish_reasons(
    {
        "stop": ("stop", "tool_calls", "function_call"),
        "max_tokens": ("length",),
        "content_filter": ("content_filter",),
    }
)


class OpenAIProvider(aio.AioModel[httpx.AsyncClient]):
    """One configured model behind an OpenAI-compatible API: its calls over aiohttp
    (kora.llm.aio), the Batch API's few requests over httpx."""

    def __init__(self, name: str, config: ModelConfig) -> None:
        super().__init__(name, config)
        self.url = f"{self.base_url}/chat/completions"
        self.tokens_field = config.token_field()

    def _new_client(self) -> httpx.AsyncClient:
        return new_client(self.timeout, self._read_key())

    def _session_headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", **bearer(self._read_key())}

    def _body(self, request: Request) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend({"role": m.role, "content": m.content} for m in request.messages)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            self.tokens_field: request.max_tokens,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.schema is not None:
            mode, bounds = self.config.structured_mode, self.config.schema_bounds
            structured.shape(body, request.schema, mode, bounds)
        return body

    async def generate(self, request: Request) -> Response:
        body, url = self._body(request), self.url
        # Ollama's own chat API takes the schema as `format` (kora.llm.structured)
        native = request.schema is not None and self.config.structured_output == "ollama_format"
        if native:
            body, url = structured.ollama_body(body), structured.ollama_url(self.base_url)
        answer = await self._post(url, orjson.dumps(body))
        if answer.status >= 400:
            raise self._status_error(answer)
        try:
            data = orjson.loads(answer.body)
        except orjson.JSONDecodeError:
            data = None
        return self._parse(structured.from_ollama(data) if native else data, answer)

    def _parse(self, data: Any, resp: aio.Answer | None) -> Response:
        """A chat completion (the body of a direct answer or of a batch's line)."""
        try:
            choice = data["choices"][0]
            message = choice["message"]
            text = message.get("content") or structured.tool_arguments(message)
            refused = text is None and bool(message.get("refusal"))
            if text is None:
                text = message.get("refusal") or ""
            if not isinstance(text, str):
                raise TypeError("content is not a string")
            usage = data.get("usage") or {}
            details = usage.get("prompt_tokens_details") or {}
            # cached tokens are part of prompt_tokens: counted apart, at their own price
            read = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
            return Response(
                text=text,
                input_tokens=int(usage.get("prompt_tokens") or 0) - read,
                output_tokens=int(usage.get("completion_tokens") or 0),
                cache_read_tokens=read,
                # the token limit counts the whole prompt, cached tokens included
                limit_input_tokens=int(usage.get("prompt_tokens") or 0),
                finish_reason="refusal"
                if refused
                else _FINISH.get(str(choice.get("finish_reason")), "other"),
                meta={
                    "finish_reason": choice.get("finish_reason"),
                    # the model id the server says answered (a dated snapshot behind an alias)
                    **({"model": data["model"]} if isinstance(data.get("model"), str) else {}),
                },
                limits=None if resp is None else from_openai(resp.headers, time.time()),
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            shown = (resp.body if resp is not None else orjson.dumps(data)).decode(errors="replace")
            status = f"HTTP {resp.status}" if resp is not None else "batch answer"
            raise ProviderError(
                f"{self.label}: {status} with a malformed body ({redact(shown, self._key)[:120]!r})",
                retryable=True,
            ) from None

    # --- the Batch API (kora.llm.batch; the requests in kora.llm.openai_batch) ---------

    async def batch_submit(self, items: list[tuple[str, Request]]) -> str:
        from kora.llm import openai_batch

        return await openai_batch.submit(self, items)

    async def batch_ended(self, batch_id: str) -> bool:
        from kora.llm import openai_batch

        return await openai_batch.ended(self, batch_id)

    async def batch_results(self, batch_id: str) -> dict[str, Response | ProviderError]:
        from kora.llm import openai_batch

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

    async def _close_client(self, client: httpx.AsyncClient) -> None:
        await client.aclose()
