"""Reading a structured answer: the JSON a model wrote, as its pydantic type, or why not.

Models and servers wrap JSON in fences or prose, and llama.cpp's grammar lets raw line
breaks into strings: each is tolerated here, and what still fails is said in the words
the model is sent when it is asked again (kora.llm.client).
"""

from __future__ import annotations

import json
from typing import TypeVar

import orjson
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def list_errors(exc: ValidationError, limit: int = 10) -> str:
    """Every problem of a validation, one "- field: message" line each (up to `limit`)."""
    return "\n".join(
        f"- {'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
        for err in exc.errors()[:limit]
    )


class StructuredOutputError(Exception):
    """The model's structured answer failed validation twice."""


def _extract_json(text: str) -> str:
    """Tolerate a fenced or prefixed JSON answer (seen from OpenAI-compatible servers)."""
    t = text.strip()
    if t.startswith("```"):
        t = t.split("\n", 1)[1] if "\n" in t else t[3:]
        if t.rstrip().endswith("```"):
            t = t.rstrip()[:-3]
    start, end = t.find("{"), t.rfind("}")
    if start > 0 and end > start:
        t = t[start : end + 1]
    return t.strip()


def _loads(text: str) -> object:
    """JSON, also with raw control characters (a line break) inside its strings: the JSON
    grammar of llama.cpp's servers lets a model write them."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text, strict=False)


def parse_answer(schema: type[M], text: str) -> M | str:
    """The answer as `schema`, or why it is not one (said to the model when asking again)."""
    try:
        return schema.model_validate(_loads(_extract_json(text)))
    except json.JSONDecodeError as exc:
        return f"the answer was not valid JSON ({exc})"
    except ValidationError as exc:
        return "the answer did not match the required schema:\n" + list_errors(exc)
