"""Items of a shard job: one failure is recorded, an error that fails every item stops it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kora.llm.base import ProviderError
from kora.run.jobs.shard_run import FatalProviderError, JobReport, run_items


class NoProgress:
    def update(self, report: JobReport, force: bool = False) -> None:
        pass


def run_all(work: Any, items: list[int]) -> tuple[list[Any], JobReport]:
    report = JobReport("test", "shard")
    results = asyncio.run(
        run_items(
            items,
            work,
            label=str,
            concurrency=4,
            report=report,
            progress=NoProgress(),  # type: ignore[arg-type]
        )
    )
    return results, report


def test_one_failed_item_is_recorded_and_the_rest_complete() -> None:
    async def work(i: int) -> int:
        if i == 2:
            raise ProviderError("model 'm': HTTP 400: bad request", status=400)
        return i * 10

    results, report = run_all(work, [1, 2, 3])
    assert results[0] == 10 and results[2] == 30
    assert isinstance(results[1], ProviderError)
    assert (report.done, report.failed) == (2, 1)
    assert "HTTP 400" in report.errors[0]["error"]


@pytest.mark.parametrize(
    "error",
    [
        ProviderError("model 'm': HTTP 401: invalid key", status=401),
        ProviderError(
            "model 'm': cannot connect to http://x (Connection refused)", unreachable=True
        ),
        ProviderError("model 'm': environment variable K is not set", retryable=False),
    ],
)
def test_an_error_that_fails_every_item_stops_the_job(error: ProviderError) -> None:
    async def work(i: int) -> int:
        raise error

    with pytest.raises(FatalProviderError, match="model 'm'"):
        run_all(work, [1, 2, 3])


@pytest.mark.timeout(30)
def test_a_refused_request_stops_the_job_as_a_config_error_and_ends_the_other_items() -> None:
    started: list[int] = []
    never = asyncio.Event()

    async def work(i: int) -> int:
        started.append(i)
        if i == 1:
            raise ProviderError("model 'm': HTTP 500: refused", status=500, config_error=True)
        await never.wait()  # the other items would wait for ever: the stop ends them
        return i

    with pytest.raises(FatalProviderError, match="HTTP 500") as info:
        run_all(work, [0, 1, 2])
    assert info.value.why == "config"
    with pytest.raises(FatalProviderError) as down:
        run_all(lambda i: _raise(ProviderError("no route", unreachable=True)), [0])
    assert down.value.why == "service"


async def _raise(exc: BaseException) -> int:
    raise exc


@pytest.mark.timeout(30)
def test_the_closing_summary_tells_fixing_the_config_from_retrying_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kora.run.jobs.progress import RUN_ENV
    from kora.run.jobs.stops import closing_summary, note_stop, rerun_advice

    monkeypatch.setenv(RUN_ENV, "run1")
    note_stop(tmp_path, "judgments a", "model 'j': HTTP 500: refused\n  To fix: x", why="config")
    note_stop(tmp_path, "judgments b", "model 'j': HTTP 500: refused\n  To fix: x", why="config")
    note_stop(tmp_path, "conversations a", "model 't': cannot connect", why="service")
    lines = closing_summary(tmp_path, "run1")
    text = "\n".join(lines)
    assert "Fix the config first" in lines[0]
    assert text.count("model 'j': HTTP 500") == 1  # one line per distinct error
    assert "Start it (or correct base_url), or retry later" in text
    assert "call store" in lines[-1]
    assert closing_summary(tmp_path, "run1") == []  # the notes are gone
    assert "stronger model" in rerun_advice(["x: model 'j' gave an invalid TestAssessment twice"])
    assert "later" in rerun_advice(["x: HTTP 503: overloaded"])
