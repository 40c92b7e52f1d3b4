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


@pytest.mark.timeout(30)
def test_the_line_never_counts_down(tmp_path: Path) -> None:
    """A call made ahead moves from the broker's snapshot to its job's between two
    readings: the line's counters keep their highest value."""
    from kora.run.progress import Monitor, Totals

    monitor = Monitor(tmp_path, "run")
    first = monitor._grown(Totals(calls=10, input_tokens=1000, cost=0.5))
    second = monitor._grown(Totals(calls=12, input_tokens=900, cost=0.4))
    assert (first.input_tokens, second.input_tokens) == (1000, 1000)
    assert second.calls == 12 and second.cost == 0.5
    line = format_totals(second, 20)
    assert "calls 12/20 (0 answered from the call store, 0 failed)" in line
    # a total below what is done already grows to it
    assert "calls 12/12 " in format_totals(second, 8)


@pytest.mark.timeout(60)
def test_ping_names_a_missing_key_and_sends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kora.commands.ping import ping_all
    from kora.config.checks import validate_config
    from tests.helpers import copy_workflow

    copy_workflow(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    plan = Pipeline.load(workdir=tmp_path)
    cfg = validate_config(plan.config.model_dump(exclude_none=True), plan.taxonomy)
    lines, ok = asyncio.run(ping_all(cfg, "gpt-target", roles=False))
    assert not ok
    assert lines == ["target gpt: not sent: set OPENAI_API_KEY (model 'gpt') first"]
