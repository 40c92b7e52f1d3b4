"""The body every shard job shares: run its items, write its records and status.

Items of a shard run concurrently. An item that still fails after the retry layer is
recorded (with its error) and the rest of the shard completes; an error that would fail
every item alike (a rejected key, a service that cannot be reached) stops the job. The
records are written first, then the status file that describes them (kora.run.jobs.shards); the
shard's retry token changes when anything failed, so the next run of the same command
re-runs it and pays only for the failed items: everything else is in the call store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kora.errors import ConfigError
from kora.llm.base import ProviderError
from kora.llm.money.budget import BudgetReached
from kora.llm.wire.faults import is_fatal
from kora.run.jobs.progress import ProgressReporter
from kora.run.jobs.shards import keep_token, new_token, write_records, write_status
from kora.run.jobs.stops import StopKind, note_stop

if TYPE_CHECKING:
    from kora.run.jobs.context import JobContext

log = logging.getLogger("kora")
T = TypeVar("T")
R = TypeVar("R")


class FatalProviderError(Exception):
    """An error that no retry and no other item can get past. `why` says what gets past
    it: `config`, fixing the config (a bad or missing key, a request the server refuses);
    `service`, running again once the service is up (it could not be reached); `budget`,
    a higher budget (kora.llm.money.budget)."""

    def __init__(self, message: str, *, why: StopKind = "config") -> None:
        super().__init__(message)
        self.why = why


@dataclass
class JobReport:
    stage: str
    shard: str
    items: int = 0
    done: int = 0
    failed: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)


def stops_the_job(exc: BaseException) -> bool:
    """An error every item would meet alike: a fatal one of a model (kora.llm.wire.faults), or
    one of the config (a template that cannot render): no item is recorded as failed."""
    return is_fatal(exc) or isinstance(exc, ConfigError)


def fatal(exc: BaseException) -> FatalProviderError:
    """The job's stop for a fatal error: one the config must fix, the service's state, or
    the budget."""
    if isinstance(exc, BudgetReached):
        return FatalProviderError(str(exc), why="budget")
    unreachable = isinstance(exc, ProviderError) and exc.unreachable
    return FatalProviderError(str(exc), why="service" if unreachable else "config")


async def run_items(
    items: list[T],
    work: Callable[[T], Awaitable[R]],
    *,
    label: Callable[[T], str],
    concurrency: int,
    report: JobReport,
    progress: ProgressReporter,
) -> list[R | BaseException]:
    sem = asyncio.Semaphore(concurrency)
    report.items = len(items)

    async def one(item: T) -> R | BaseException:
        async with sem:
            try:
                result = await work(item)
            except Exception as exc:
                if stops_the_job(exc):
                    raise fatal(exc) from None
                report.failed += 1
                report.errors.append({"item": label(item), "error": f"{type(exc).__name__}: {exc}"})
                log.error("%s failed: %s: %s", label(item), type(exc).__name__, exc)
                progress.update(report)
                return exc
            report.done += 1
            progress.update(report)
            return result

    tasks = [asyncio.ensure_future(one(i)) for i in items]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        # a job that stops makes no more calls: its other items end here too
        for t in tasks:
            t.cancel()
        raise


@dataclass
class ShardJob:
    """One shard of one stage: what its status file says and where its records go."""

    report: JobReport  # its stage and shard, and how its items went
    output: Path
    token: str  # the retry param this run was started with
    # the models that made the shard, by role: `kora plan` tells a stored shard from one
    # another model made (which the next run re-makes)
    models: dict[str, object]

    def write(
        self, ctx: JobContext, records: list[Any], more: dict[Path, list[Any]] | None = None
    ) -> int:
        """The records (and other files of the shard), then the status, then the token."""
        files = {self.output.name: write_records(self.output, records)}
        for path, rows in (more or {}).items():
            files[path.name] = write_records(path, rows)
        r = self.report
        write_status(
            self.output,
            {
                "stage": r.stage,
                "shard": r.shard,
                "items": r.items,
                "done": r.done,
                "failed": r.failed,
                "errors": r.errors,
                "models": self.models,
                "usage": ctx.usage.records(),
                "calls": ctx.usage.used_records(),
            },
            files,
        )
        if r.failed:  # a fresh token: the next run re-runs this shard
            new_token(self.output)
        else:
            keep_token(self.output, self.token)
        t = ctx.usage.totals()
        log.info(
            "%s %s: %d/%d done, %d failed; %d calls (%d cached, %d failed)",
            r.stage,
            r.shard,
            r.done,
            r.items,
            r.failed,
            t["calls"],
            t["cached"],
            t["failures"],
        )
        if r.failed:
            log.warning(
                "%d of %d items failed; they are recorded in the shard and will be retried "
                "by the next run of the same command",
                r.failed,
                r.items,
            )
        return 0


async def run_shard_job(
    job: ShardJob,
    ctx: JobContext,
    items: list[T],
    work: Callable[[T], Awaitable[R]],
    *,
    label: Callable[[T], str],
) -> list[R | BaseException]:
    """Every item of the shard, with progress shown on the run's line."""
    progress = ProgressReporter(ctx.usage, ctx.workdir, job.report)
    try:
        return await run_items(
            items,
            work,
            label=label,
            concurrency=ctx.concurrency,
            report=job.report,
            progress=progress,
        )
    except FatalProviderError as exc:
        note_stop(ctx.workdir, f"{job.report.stage} {job.report.shard}", str(exc), why=exc.why)
        raise
    finally:
        progress.close()
