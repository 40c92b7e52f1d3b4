"""The run's progress line: its total, and what it shows while calls wait to retry."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kora.llm import retry
from kora.llm.base import ChatMessage, ProviderError, Request, Response
from kora.llm.client import ModelClient, Usage
from kora.llm.retry import RetryPolicy
from kora.run.pipeline import Pipeline
from kora.run.plan import count_calls
from kora.run.progress import Totals, format_totals
from tests.helpers import copy_workflow


class FailsThenAnswers:
    name = "flaky"

    def __init__(self, failures: int) -> None:
        self.failures = failures

    async def generate(self, request: Request) -> Response:
        if self.failures:
            self.failures -= 1
            raise ProviderError("model 'm': HTTP 529: overloaded", status=529)
        return Response(text="ok")

    def should_retry(self, exc: BaseException) -> bool:
        return True

    async def aclose(self) -> None:
        return None


def test_a_call_waiting_to_retry_is_counted_while_it_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    from kora.llm.config import ModelConfig

    monkeypatch.setattr(retry, "_testing", False)
    usage = Usage()
    client = ModelClient(
        "m",
        ModelConfig(provider="mock"),
        cache=None,
        usage=usage,
        provider=FailsThenAnswers(1),
        retry_policy=RetryPolicy(initial=0.4, jitter=0.0),
    )
    seen: list[tuple[int, str]] = []

    async def main() -> None:
        call = asyncio.create_task(client.text([ChatMessage("user", "hi")], stage="t"))
        while not usage.waiting and not call.done():
            await asyncio.sleep(0.01)  # polled until the call has failed once and waits
        seen.append((usage.waiting, usage.last_retry))
        assert await call == "ok"
        seen.append((usage.waiting, usage.last_retry))

    asyncio.run(main())
    assert seen[0][0] == 1 and "529" in seen[0][1]
    assert seen[1][0] == 0


def test_the_line_says_calls_are_waiting_and_why() -> None:
    line = format_totals(Totals(calls=10, waiting=3, last_retry="model 'm': HTTP 529"), 100)
    assert "3 waiting to retry (model 'm': HTTP 529)" in line
    assert "waiting" not in format_totals(Totals(calls=10), 100)


def test_the_total_counts_the_calls_of_the_jobs_to_run_only(tmp_path: Path) -> None:
    copy_workflow(tmp_path)  # a project with no shards made yet
    plan = Pipeline.load(workdir=tmp_path)
    wc = {
        "risk": "violence_and_physical_harm",
        "age": "7to9",
        "motivation": "curiosity_exploration",
    }
    n = plan.config.grid.seeds_per_task
    prompts = len(plan.config.target_prompts("gpt-target"))
    t = dict(wc, target="gpt-target")

    def count(*jobs: tuple[str, dict[str, str]]) -> int:
        return count_calls(plan, [plan.job_spec(rule, w) for rule, w in jobs])

    # nothing stored, real models: each job at its nominal count, and a seeds call that
    # is not known yet counts the scenarios, tests and judgments it would give
    assert count(("seeds", wc)) == 1
    assert count(("seeds", wc), ("scenarios", wc)) == 1 + 3 * n
    judged = 2 * len(plan.config.judges) * n * prompts
    assert count(("seeds", wc), ("scenarios", wc), ("conversations", t), ("judgments", t)) == (
        1 + 3 * n + 5 * n * prompts + judged
    )
