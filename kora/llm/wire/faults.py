"""A server's refusal, classed: a configuration error, or something a retry may get past.

A refusal that no retry can change is a configuration error of that model: any 4xx but a
timeout (408), a conflict (409) or rate limiting (429), and a 5xx whose body says the
request itself is invalid (llama-cpp-python's server answers every invalid request with a
500 and a pydantic validation error). Such an error is not retried; it stops the model's
calls and says what to change. A 4xx about one request's content (a provider's content
filter flagging a prompt) is that request's failure, not the model's.

The server's reason is shown as readable text: its lines kept (not `\\u000a`), a Python
traceback the server appended left out, pydantic's error records in a few words, control
characters still escaped and the key masked (`kora.llm.masking.redact`).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from kora.llm.base import BlockedError, ProviderError
from kora.llm.headers import ServerLimits
from kora.llm.masking import redact
from kora.llm.money.budget import BudgetReached

# a 4xx about one request's content, not about the model's settings
_ONE_REQUEST = re.compile(
    r"content[ _-]?filter|content management polic|flagged|usage polic|invalid_prompt|"
    r"safety system",
    re.I,
)
# a 5xx that is the server's way of saying the request is invalid
_INVALID = re.compile(
    r"validation errors?\b|invalid[ _]request|input should be|literal_error|extra inputs are "
    r"not permitted|field required|not supported|unsupported|not found in tools|"
    r"unrecognized request argument|failed to parse grammar",
    re.I,
)
_TRACEBACK = re.compile(r"\n\s*File \"")
_PYDANTIC = re.compile(
    r"\{'type': '[a-z_]+', 'loc': \((?P<loc>[^)]*)\), 'msg': (?P<msg>\"[^\"]*\"|'[^']*'), "
    r"'input': (?P<input>'[^']*'|[^,}]*)[^\n]*"
)


def is_config_error(status: int, reason: str) -> bool:
    """No retry can change this answer, and it is about the model's settings."""
    if status in (408, 409, 429):
        return False
    if 400 <= status < 500:
        return not _ONE_REQUEST.search(reason)
    return status >= 500 and bool(_INVALID.search(reason))


def server_reason(content: bytes, fallback: str) -> str:
    """The message of an error body: OpenAI's `{error: {message}}`, `{error: "..."}`
    (Ollama), `{detail: ...}` (FastAPI), `{message: ...}`, or the text itself."""
    try:
        body: Any = orjson.loads(content)
    except orjson.JSONDecodeError:
        return content.decode("utf-8", "replace").strip()[:2000] or fallback
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err.get("code") or err.get("type") or fallback)
        for key in ("error", "detail", "message"):
            if isinstance(body.get(key), str) and body[key]:
                return str(body[key])
    return fallback


def _pydantic_line(m: re.Match[str]) -> str:
    loc = ".".join(p.strip().strip("'\"") for p in m["loc"].split(",") if p.strip())
    return f"{loc}: {m['msg'][1:-1]} (got {m['input'].strip()})"


def readable(text: str, key: str | None, limit: int = 800) -> str:
    """A server's message for a terminal: one line, or its lines indented under the first."""
    text = _TRACEBACK.split(text, 1)[0]
    text = _PYDANTIC.sub(_pydantic_line, text)
    lines = [redact(line.strip(), key) for line in text.splitlines() if line.strip()]
    out = "\n      ".join(lines)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def advice(name: str, status: int, reason: str, mode: str | None) -> str:
    """What to change in models.<name> for a configuration error."""
    where = f"models.{name}"
    low = reason.lower()
    if "response_format" in low and "json_object" in low and mode in (None, "json_schema"):
        return (
            f"this server does not take OpenAI's response_format json_schema: set "
            f"`structured_output: json_object` under {where} (llama-cpp-python's server; with "
            "`schema_bounds: minimums`), or `tool` or `prompt`"
        )
    if "grammar" in low:
        return f"set `schema_bounds: false` under {where}"
    if "budget_tokens" in low:
        return f"set `thinking_tokens` under {where} to 1,024 or more, and `max_tokens` above it"
    if "max_completion_tokens" in low:
        return (
            f"a reasoning model: set `reasoning_effort` under {where} (it is then sent "
            "max_completion_tokens, which it takes)"
        )
    if "temperature" in low:
        return f"leave `temperature` out under {where} (a model that reasons takes only 1)"
    if any(w in low for w in ("response_format", "tool_choice", "tools", "format")):
        return (
            f"the server does not take the schema as sent ({mode or 'json_schema'}): try another "
            f"`structured_output` under {where} (json_schema, json_object, ollama_format, tool, "
            "prompt); `kora ping TARGET` shows what it accepts"
        )
    if "context" in low or "too long" in low or "reduce the length" in low:
        return (
            "the prompt and max_tokens do not fit the model's context window: give the server "
            "a larger one (llama.cpp: --n_ctx; vLLM: --max-model-len; Ollama: "
            f"OLLAMA_CONTEXT_LENGTH) or lower `max_tokens` under {where}"
        )
    if status == 404:
        if "model" in low:
            return f"the server does not know this model: set `model` under {where} to one it lists"
        return f"nothing answers at this address: check `base_url` under {where}"
    return (
        f"check {where} (model, base_url, max_tokens, structured_output, schema_bounds) "
        "against what the server accepts; `kora ping TARGET` tries each role's call"
    )


def refusal(
    label: str,
    name: str,
    status: int,
    reason: str,
    *,
    key: str | None,
    key_env: str,
    mode: str | None = None,
    retry_after: float | None = None,
    limits: ServerLimits | None = None,
) -> ProviderError:
    """The error of an HTTP error status, a configuration error or not; a refused key
    names its variable (`key_env`), and says when none was sent."""
    shown = readable(reason, key)
    config_error = is_config_error(status, reason)
    message = f"{label}: HTTP {status}: {shown}"
    if config_error and status in (401, 403):
        message += f" (check {key_env})" if key else f" (no API key sent: {key_env} is not set)"
    elif config_error:
        message = (
            f"{label}: HTTP {status}: the server refused the request, and retrying cannot "
            f"help: {shown}\n  To fix: {advice(name, status, reason, mode)}"
        )
    return ProviderError(
        message, status=status, retry_after=retry_after, limits=limits, config_error=config_error
    )


def is_fatal(exc: BaseException) -> bool:
    """A rejected or missing key, a request the server refuses as invalid (a configuration
    error, kora.llm.wire.faults), a service that cannot be reached, or a budget with no room
    left, fails every item alike: the job stops rather than record the same error for
    each of them."""
    return isinstance(exc, BudgetReached) or (
        isinstance(exc, ProviderError)
        and not isinstance(exc, BlockedError)
        and (
            exc.status in (401, 403)
            or exc.config_error
            or exc.unreachable
            or (exc.status is None and not exc.retryable)
        )
    )
