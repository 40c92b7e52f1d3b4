"""OpenAI-compatible servers as local ones differ: each takes a structured answer's schema
in one place only, and refuses the others the way the real server does.

- `llamacpp` (llama-cpp-python's server, as measured in docs/local-servers.md):
  `response_format` of type `text` or `json_object` (with the schema in `schema`); any
  other type gets HTTP 500 with a pydantic validation error and a Python traceback in the
  message, as that server sends it. A schema with a `maxLength` of 1,500 or more closes
  the connection without an answer (the real server's process dies there).
- `ollama`: `/v1/chat/completions` takes `json_schema`; `/api/chat` (Ollama's own API)
  takes the schema as `format` and answers in Ollama's shape.
- `vllm`: `json_schema` and forced tool calls; `json_object` with a schema is refused
  with a 400.
- `bare`: no constrained decoding at all: a `response_format` or `tools` gets a 400.

A structured answer is made from `answer(rec)` (by default: `{"answer": "ok"}`); a text
answer echoes the last user message. Every request is recorded (`requests`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal

from tests.loopback import OpenAIServer, Recorded, Reply, _Drop, last_user_text

Dialect = Literal["llamacpp", "ollama", "vllm", "bare"]

# llama-cpp-python 0.3.36's answer to `response_format: {type: json_schema}` (its shape)
LLAMA_REFUSAL = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"/srv/llama_cpp/server/"
    'app.py", line 376, in create_chat_completion\n    POST /v1/chat/completions'
)


def _max_length(schema: Any) -> int:
    """The largest maxLength anywhere in a schema."""
    if isinstance(schema, dict):
        own = schema.get("maxLength", 0) if isinstance(schema.get("maxLength"), int) else 0
        return max([own, *(_max_length(v) for v in schema.values())])
    if isinstance(schema, list):
        return max([0, *(_max_length(v) for v in schema)])
    return 0


class DialectServer(OpenAIServer):
    def __init__(
        self,
        dialect: Dialect,
        answer: Callable[[Recorded], Any] | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.dialect = dialect
        self.answer_of = answer or (lambda rec: {"answer": "ok"})

    def error(self, status: int, message: str, kind: str) -> Reply:
        return Reply.json(
            status, {"error": {"message": message, "type": kind, "param": None, "code": None}}
        )

    def handle(self, rec: Recorded, *, invalid: bool) -> Reply:
        body = rec.body if isinstance(rec.body, dict) else {}
        if rec.path == "/api/chat" and self.dialect == "ollama":
            return self._ollama(rec, body)
        if rec.path != "/v1/chat/completions":
            return Reply.json(404, {"detail": "Not Found"})
        fmt = body.get("response_format") or {}
        kind = fmt.get("type", "text")
        tools = body.get("tools")
        if self.dialect == "bare" and (fmt or tools):
            return self.error(400, "response_format and tools are not supported", "invalid")
        if self.dialect == "llamacpp":
            if kind not in ("text", "json_object"):
                return self.error(500, LLAMA_REFUSAL, "internal_server_error")
            if _max_length(fmt.get("schema") or tools) >= 1500:
                raise _Drop  # the connection closes without an answer
        if self.dialect == "vllm" and kind == "json_object" and "schema" in fmt:
            return self.error(400, "response_format.schema: extra inputs are not permitted", "x")
        message: dict[str, Any] = {"role": "assistant"}
        finish = "stop"
        if kind in ("json_schema", "json_object") or tools:
            content = json.dumps(self.answer_of(rec))
            if tools:
                name = body["tool_choice"]["function"]["name"]
                call = {"id": "call_1", "type": "function"}
                call["function"] = {"name": name, "arguments": content}
                message.update(content=None, tool_calls=[call])
                finish = "tool_calls"
            else:
                message["content"] = content
        else:
            answers = self.answers
            message["content"] = answers.popleft() if answers else f"echo: {last_user_text(body)}"
        return Reply.json(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            },
        )

    def _ollama(self, rec: Recorded, body: dict[str, Any]) -> Reply:
        fmt = body.get("format")
        text = json.dumps(self.answer_of(rec)) if fmt else f"echo: {last_user_text(body)}"
        return Reply.json(
            200,
            {
                "model": body.get("model"),
                "message": {"role": "assistant", "content": text},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": 13,
                "eval_count": 5,
            },
        )
