"""Anthropic Messages API through the official SDK.

Structured answers use forced tool use: one tool whose `input_schema` is the pydantic
type's JSON Schema and `tool_choice` naming it; the tool input comes back as the JSON text
of the response. The SDK's own retries are off (`max_retries=0`): `kora.llm.retry` retries
every provider the same way, and `kora.llm.limits` must see every 429.

The endpoint is the model's `base_url`, else `ANTHROPIC_BASE_URL`, else the public API,
given with or without the trailing `/v1` (the SDK's form, or the AI SDK's); the key comes
from `api_key_env` (default `ANTHROPIC_API_KEY`). `temperature` is sent as a body field
(recent SDKs dropped the argument). A timeout or a dropped connection is a status-less,
retryable `ProviderError`; error messages name the model and status and never the key.
The answer's rate-limit headers (`anthropic-ratelimit-*`) come with it and with a 429.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from kora.llm import prompt_cache
from kora.llm.base import ProviderError, Request, Response, answer_schema, finish_reasons
from kora.llm.headers import from_anthropic
from kora.llm.http import RemoteModel, is_connect_error, read_key, unreachable
from kora.llm.retry import parse_retry_after, redact

DEFAULT_BASE_URL = "https://api.anthropic.com"
# the Messages API's stop_reason in the project's vocabulary (kora.schemas.FinishReason)
_FINISH = finish_reasons(
    {
        "stop": ("end_turn", "stop_sequence", "tool_use"),
        "max_tokens": ("max_tokens", "model_context_window_exceeded"),
        "refusal": ("refusal",),
    }
)
# The Messages API rejects an empty turn before the last one; a target that answered
# nothing is shown this instead in the later turns (its transcript keeps the empty reply).
EMPTY_TURN = "(no reply)"


class AnthropicProvider(RemoteModel[anthropic.AsyncAnthropic]):
    """One configured Anthropic model."""

    KEY_ENV = "ANTHROPIC_API_KEY"
    URL_ENV = "ANTHROPIC_BASE_URL"
    DEFAULT_URL = DEFAULT_BASE_URL

    def normalise_url(self, url: str) -> str:
        """The SDK appends `/v1/messages`; accept a base given with `/v1` (the AI SDK's
        form)."""
        url = url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url

    def _new_client(self) -> anthropic.AsyncAnthropic:
        key = read_key(self.key_env, self.label, required=True)
        assert key is not None  # required: read_key raised otherwise
        self._key = key
        return anthropic.AsyncAnthropic(
            api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout
        )

    def _params(self, request: Request) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": [
                {"role": m.role, "content": m.content or EMPTY_TURN} for m in request.messages
            ],
        }
        if request.system:
            params["system"] = request.system
        if request.temperature is not None:
            # recent SDKs dropped the argument; the API field still works for models that
            # take it (extra_body also works with older SDKs)
            params["extra_body"] = {"temperature": request.temperature}
        if request.schema is not None:
            tool, schema = answer_schema(request.schema)
            params["tools"] = [
                {
                    "name": tool,
                    "description": f"Record the answer as one {tool} object.",
                    "input_schema": schema,
                }
            ]
            params["tool_choice"] = {"type": "tool", "name": tool}
        if self.config.prompt_cache:
            params = prompt_cache.mark(params, ttl=self.config.cache_ttl, model=self.model)
        return params

    async def generate(self, request: Request) -> Response:
        client = self._clients.get()
        try:
            # the raw response (public API) carries the rate-limit headers
            raw = await client.messages.with_raw_response.create(**self._params(request))
            msg = await raw.parse()
        except anthropic.APIStatusError as exc:
            raise self._status_error(exc) from None
        except anthropic.APITimeoutError:
            raise ProviderError(
                f"{self.label}: no answer within {self.timeout:g} s", status=None
            ) from None
        except anthropic.APIConnectionError as exc:
            if exc.__cause__ is not None and is_connect_error(exc.__cause__):
                raise unreachable(self.label, self.base_url, exc.__cause__) from None
            raise ProviderError(
                f"{self.label}: connection failed ({redact(str(exc.__cause__ or exc), self._key)})",
                status=None,
            ) from None
        except anthropic.APIResponseValidationError as exc:
            raise ProviderError(
                f"{self.label}: malformed response ({redact(str(exc), self._key)[:200]})",
                retryable=True,
            ) from None
        except anthropic.AnthropicError as exc:
            # e.g. a 200 whose body is not JSON
            raise ProviderError(
                f"{self.label}: bad response ({redact(str(exc), self._key)[:200]})",
                retryable=True,
            ) from None
        except ValueError as exc:  # JSON decoding of a malformed body
            raise ProviderError(
                f"{self.label}: malformed response body ({str(exc)[:200]})", retryable=True
            ) from None

        content = getattr(msg, "content", None)
        if not isinstance(content, list):
            raise ProviderError(f"{self.label}: response without content", retryable=True)
        text = ""
        if request.schema is not None:
            for block in content:
                if getattr(block, "type", None) == "tool_use":
                    text = json.dumps(getattr(block, "input", None), ensure_ascii=False)
                    break
        if not text:
            text = "".join(
                str(getattr(b, "text", "")) for b in content if getattr(b, "type", None) == "text"
            )
        usage = getattr(msg, "usage", None)
        return Response(
            text=text,
            input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            cache_write_tokens=int(getattr(usage, "cache_creation_input_tokens", 0) or 0),
            cache_read_tokens=int(getattr(usage, "cache_read_input_tokens", 0) or 0),
            finish_reason=_FINISH.get(str(getattr(msg, "stop_reason", None)), "other"),
            meta={"stop_reason": getattr(msg, "stop_reason", None)},
            limits=from_anthropic(raw.headers),
        )

    def _status_error(self, exc: anthropic.APIStatusError) -> ProviderError:
        status = exc.status_code
        detail = ""
        body = exc.body
        if isinstance(body, dict):
            err = body.get("error")
            if isinstance(err, dict):
                detail = str(err.get("message") or err.get("type") or "")
        if not detail:
            detail = exc.response.reason_phrase or ""
        detail = redact(detail, self._key)[:300]
        hint = ""
        if status in (401, 403):
            hint = f" (check {self.key_env})"
        return ProviderError(
            f"{self.label}: HTTP {status}: {detail}{hint}",
            status=status,
            retry_after=parse_retry_after(exc.response.headers),
            limits=from_anthropic(exc.response.headers),
        )

    async def _close_client(self, client: anthropic.AsyncAnthropic) -> None:
        await client.close()
