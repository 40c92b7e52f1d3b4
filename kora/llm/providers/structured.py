"""How a structured (JSON) answer is asked of an OpenAI-compatible server.

Servers that all call themselves OpenAI-compatible take the answer's schema in different
places; a model's `structured_output` (kora.llm.settings.config) says which:

- `json_schema` (the default): OpenAI's `response_format: {type: json_schema, json_schema:
  {name, schema}}` (OpenAI, vLLM, LM Studio, Ollama's /v1, llama.cpp's C++ llama-server);
- `json_object`: `response_format: {type: json_object, schema: ...}`, the schema in the
  server's extension field (llama-cpp-python's server, which refuses `json_schema`);
- `ollama_format`: Ollama's own chat API (`POST /api/chat`) with the schema as `format`;
- `tool`: a function call forced with `tool_choice`, the answer read from its arguments;
- `prompt`: no constraint at all: the schema is written into the system prompt (for
  servers that have none).

With `schema_bounds: false` the schema goes without its length and count bounds
(`without_bounds`): a grammar compiler that turns `maxLength: 2000` into 2,000 nested
optional characters gives up, and llama-cpp-python's server dies of it. With
`schema_bounds: minimums` only the upper ones go: a lower bound compiles into a plain
repetition, and keeps a small model from answering too short (measured with
SmolLM2-135M: its safety judgment fits the schema with the minimums kept, and its reasons
come out under the 200-character minimum without them). Whatever was sent,
the client (kora.llm.client) validates every answer against the full pydantic schema and
asks once more, with the errors, when it does not pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from kora.llm.base import answer_schema
from kora.llm.settings.config import ModelConfig, SchemaBounds

# what each mode sends, in a user's words (kora check-config, kora ping)
SENT_AS: dict[str, str] = {
    "json_schema": "response_format json_schema",
    "json_object": "response_format json_object with the schema in its `schema` field",
    "ollama_format": "Ollama's /api/chat with the schema as `format`",
    "tool": "a forced tool call with the schema as its parameters",
    "prompt": "the schema in the system prompt, no constrained decoding",
}

# JSON Schema keywords that bound a length or a count (a value's range stays: a grammar
# compiles `minimum: 7` into a few rules, `maxLength: 2000` into 2,000 nested ones)
UPPER_BOUNDS = frozenset({"maxLength", "maxItems", "maxProperties"})
BOUNDS = UPPER_BOUNDS | {"minLength", "minItems", "minProperties"}
# keywords whose value is a mapping of names to schemas, a list of schemas, or a schema
_NAMED = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_LISTS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_ONE = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
    }
)


def without_bounds(schema: Any, drop: frozenset[str] = BOUNDS) -> Any:
    """A copy of a JSON schema without its length and count bounds (or the keywords in
    `drop`), at any depth.

    Only schema keywords are dropped: a property *named* `maxLength` stays, and so do the
    values of `enum`, `const`, `default` and `examples`.
    """
    if isinstance(schema, list):  # `items` as a list (older drafts)
        return [without_bounds(s, drop) for s in schema]
    if not isinstance(schema, dict):
        return schema  # true / false schemas
    out: dict[str, object] = {}
    for key, value in schema.items():
        if key in drop:
            continue
        if key in _NAMED and isinstance(value, dict):
            out[key] = {name: without_bounds(s, drop) for name, s in value.items()}
        elif (key in _LISTS and isinstance(value, list)) or key in _ONE:
            out[key] = without_bounds(value, drop)
        else:
            out[key] = value
    return out


def sent_schema(schema: type[BaseModel], bounds: SchemaBounds) -> tuple[str, dict[str, Any]]:
    """The name and the JSON schema sent for an answer of type `schema`."""
    name, doc = answer_schema(schema)
    if bounds is True:
        return name, doc
    return name, without_bounds(doc, UPPER_BOUNDS if bounds == "minimums" else BOUNDS)


def instruction(schema: Mapping[str, object]) -> str:
    """What `prompt` mode adds to the system prompt."""
    return (
        "Answer with a single JSON object and nothing else (no prose, no code fence). "
        "It must be valid against this JSON Schema:\n"
        + json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    )


def shape(
    body: dict[str, Any], schema: type[BaseModel], mode: str | None, bounds: SchemaBounds
) -> None:
    """Add to a chat-completions request body what asks for an answer of type `schema`."""
    name, doc = sent_schema(schema, bounds)
    if mode == "json_object":
        body["response_format"] = {"type": "json_object", "schema": doc}
    elif mode == "ollama_format":
        body["format"] = doc
    elif mode == "tool":
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"Record the answer as one {name} object.",
                    "parameters": doc,
                },
            }
        ]
        body["tool_choice"] = {"type": "function", "function": {"name": name}}
    elif mode == "prompt":
        messages = body["messages"]
        if messages and messages[0].get("role") == "system":
            messages[0] = {
                **messages[0],
                "content": f"{messages[0]['content']}\n\n{instruction(doc)}",
            }
        else:
            messages.insert(0, {"role": "system", "content": instruction(doc)})
    else:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": doc, "strict": False},
        }


# --- Ollama's own chat API (`ollama_format`) -----------------------------------------------


def ollama_url(base_url: str) -> str:
    """`/api/chat` of the Ollama server whose OpenAI-compatible API is at `base_url`."""
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return f"{root}/api/chat"


def ollama_body(body: Mapping[str, object]) -> dict[str, object]:
    """A chat-completions body (shaped for `ollama_format`) as Ollama's /api/chat takes it."""
    options: dict[str, object] = {}
    for ours, theirs in (("max_tokens", "num_predict"), ("temperature", "temperature")):
        if ours in body:
            options[theirs] = body[ours]
    out = {"model": body["model"], "messages": body["messages"], "stream": False}
    if "format" in body:
        out["format"] = body["format"]
    if options:
        out["options"] = options
    return out


def from_ollama(data: object) -> object:
    """An /api/chat answer in the chat-completions shape (what OpenAIProvider parses)."""
    if not isinstance(data, dict) or not isinstance(data.get("message"), dict):
        return data
    reason = data.get("done_reason")
    return {
        "choices": [
            {
                "message": data["message"],
                "finish_reason": "length" if reason == "length" else reason or "stop",
            }
        ],
        "usage": {
            "prompt_tokens": data.get("prompt_eval_count") or 0,
            "completion_tokens": data.get("eval_count") or 0,
        },
    }


def tool_arguments(message: Mapping[str, object]) -> str | None:
    """The arguments of a message's first tool call, as JSON text (a `tool` answer)."""
    calls = message.get("tool_calls") or []
    if not calls or not isinstance(calls, list) or not isinstance(calls[0], dict):
        return None
    args = (calls[0].get("function") or {}).get("arguments")
    if isinstance(args, str):
        return args
    return None if args is None else json.dumps(args)


# --- what kora check-config says about a model's settings ---------------------------------


def config_problem(name: str, config: ModelConfig) -> tuple[str, str] | None:
    """(the config key, the error) when a model's structured-output settings cannot work."""
    loc = f"models.{name}"
    mode = config.structured_output
    if not config.kind.structured_modes and (mode is not None or config.schema_bounds is not True):
        key = "structured_output" if mode is not None else "schema_bounds"
        why = (
            "a chat service makes no structured calls"
            if config.is_service
            else f"a {config.provider} model asks for structured answers its own way"
        )
        return (
            f"{loc}.{key}",
            f"{loc}.{key}: only for OpenAI-compatible servers (`provider: openai`): {why}",
        )
    if config.structured_mode == config.kind.structured:
        return None
    if config.batch:
        return (
            f"{loc}.batch",
            f"{loc}: batch mode sends OpenAI's Batch API requests, which take only "
            f"`structured_output: json_schema`, not {mode}; drop one of the two",
        )
    # a model without base_url (and no OPENAI_BASE_URL) means OpenAI's own API too
    if mode in ("json_object", "ollama_format") and config.public_api():
        return (
            f"{loc}.structured_output",
            f"{loc}.structured_output: {mode} is for a local server ({SENT_AS[mode]}); "
            "OpenAI's own API takes json_schema (leave structured_output out)",
        )
    return None


def config_warnings(name: str, config: ModelConfig) -> list[str]:
    """Settings that are valid but will most likely fail on the server they are meant for."""
    if config.structured_output == "json_object" and config.schema_bounds is True:
        return [
            f"models.{name}: structured_output json_object (llama-cpp-python's server) with "
            "the schema's bounds: that server's grammar compiler fails on long maxLength "
            "bounds such as this project's (200-2000 characters) and its process dies; set "
            "`schema_bounds: minimums` (or false; answers are still checked against the full "
            "schema)"
        ]
    return []
