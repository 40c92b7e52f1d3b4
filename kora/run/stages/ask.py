"""One structured question to a model: a rendered prompt in, a validated answer out."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from kora.benchmarks.templates import Prompt
from kora.llm.base import ChatMessage
from kora.llm.chain import Asker

M = TypeVar("M", bound=BaseModel)


async def ask(
    client: Asker,
    prompt: Prompt,
    schema: type[M],
    *,
    stage: str,
    hints: dict[str, Any] | None = None,
) -> M:
    """The prompt's user part as the only message, its system part as the system prompt."""
    return await client.structured(
        [ChatMessage("user", prompt.user or "")],
        schema,
        system=prompt.system,
        stage=stage,
        hints=hints,
    )
