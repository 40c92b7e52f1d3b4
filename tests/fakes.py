"""An in-process scripted provider for fast unit tests of the stages.

(Wire-level behaviour is tested against loopback servers; this only answers requests.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kora.llm.base import Request, Response
from kora.llm.client import ModelClient
from kora.llm.money.usage import Usage
from kora.llm.providers.factories import Shared
from kora.llm.settings.config import ModelConfig


class Scripted:
    name = "scripted"

    def __init__(
        self, answer: Callable[[Request], str], finish: Callable[[Request], str | None]
    ) -> None:
        self.answer = answer
        self.finish = finish
        self.requests: list[Request] = []

    async def generate(self, request: Request) -> Response:
        self.requests.append(request)
        return Response(
            text=self.answer(request),
            input_tokens=10,
            output_tokens=5,
            finish_reason=self.finish(request),  # type: ignore[arg-type]
        )

    def should_retry(self, exc: BaseException) -> bool:
        return False

    async def aclose(self) -> None:
        return None


def client(
    answer: Callable[[Request], str],
    name: str = "scripted",
    cache_dir: Path | None = None,
    usage: Usage | None = None,
    finish: Callable[[Request], str | None] = lambda r: "stop",
) -> tuple[ModelClient, Scripted]:
    from kora.llm.store.cache import CallCache

    provider = Scripted(answer, finish)
    c = ModelClient(
        name,
        ModelConfig(provider="mock"),
        Shared(
            store=CallCache(cache_dir) if cache_dir else None,
            usage=usage or Usage(),
            fixed={name: provider},
        ),
    )
    return c, provider
