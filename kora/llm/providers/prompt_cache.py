"""Where a request to Anthropic marks its prompt for the provider's cache.

A request's prompt is, in order, the tool (the answer's schema), the system prompt and
the messages; a `cache_control` marker caches everything up to it, and a later request
that starts with the same text reads it back at a tenth of the input price. Two markers:

- after the system prompt, which is the same for every call of a stage (the rubric, the
  child's rules, the target's system prompt);
- after the last message of a multi-turn request (a target or simulated-child turn), so
  the next turn of the same conversation reads the conversation so far.

A single-message request whose message is unique to one test (a judge's transcript) is
not marked beyond its system prompt: writing it would cost more (1.25x) and never be
read. Below the model's minimum cacheable length (kora.llm.registry) nothing is marked:
the provider would not cache it anyway. OpenAI caches long prompts by itself.
"""

from __future__ import annotations

from typing import Any

import orjson

from kora.llm.limits.tokens import estimate_input_tokens


def _tokens(*parts: object) -> int:
    return estimate_input_tokens(sum(len(orjson.dumps(p)) for p in parts if p is not None))


def mark(params: dict[str, Any], *, ttl: str, minimum: int) -> dict[str, Any]:
    """`params` (a Messages API request) with cache markers where they pay (`minimum`:
    the shortest prompt the model's cache keeps, in tokens)."""
    control: dict[str, str] = {"type": "ephemeral"}
    if ttl == "1h":
        control["ttl"] = "1h"
    tools, system, messages = params.get("tools"), params.get("system"), params["messages"]
    out = dict(params)
    if system and _tokens(tools, system) >= minimum:
        out["system"] = [{"type": "text", "text": system, "cache_control": control}]
    if len(messages) > 1 and _tokens(tools, system, messages) >= minimum:
        last = messages[-1]
        marked = {"type": "text", "text": last["content"], "cache_control": control}
        out["messages"] = [*messages[:-1], {"role": last["role"], "content": [marked]}]
    return out
