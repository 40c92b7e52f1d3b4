"""One structured question to a model: a rendered prompt in, a validated answer out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from kora.benchmarks.templates import Prompt
from kora.llm.chain import Asker

M = TypeVar("M", bound=BaseModel)


async def ask(
    client: Asker,
    prompt: Prompt,
    schema: type[M],
    *,
    stage: str,
    hints: dict[str, object] | None = None,
) -> M:
    """The prompt's user part as the only message, its system part as the system prompt."""
    return await client.structured(
        prompt.messages(), schema, system=prompt.system, stage=stage, hints=hints
    )


@dataclass(frozen=True)
class Question:
    """A structured call as a benchmark poses it: the prompt, the answer's schema, the
    usage stage it counts under and the hints the offline mock reads."""

    prompt: Prompt
    schema: type[BaseModel]
    stage: str
    hints: dict[str, object] | None = None

    async def put(self, client: Asker) -> Any:
        return await ask(client, self.prompt, self.schema, stage=self.stage, hints=self.hints)
