"""Items of a shard job: one failure is recorded, an error that fails every item stops it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kora.llm.base import ProviderError
from kora.run.jobs import FatalProviderError, JobReport, run_items


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
