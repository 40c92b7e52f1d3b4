"""Calls ahead of the jobs that need them, so a local run works at the provider's limit.

`snakemake --cores 10` runs ten jobs at a time, and a shard job has only a handful of
items: scenarios of three seeds, say, keep three chains of calls going. Ten such jobs
leave a provider that allows forty requests a second mostly idle. So the run's broker,
given every shard job the run will execute (their specs, built in `onstart` exactly as
the jobs' scripts build them), works through them item by item as far as each item goes:
a seed's expansion starts as soon as its seed call returns, a scenario's conversations as
soon as it validates, a conversation's judgments as soon as it ends. The limiter (shared
with the jobs) keeps the calls within the provider's limits.

Nothing is written but the call store: each Snakemake job still runs, in its turn, and
finds its calls answered (or, while one is still in flight, waits for it: kora.llm.shared_calls)
if it asks byte for byte what was asked ahead: the two routes' contract, in
docs/architecture.md. A call made ahead is counted as paid by the job that asks for it,
so usage.json and the status files are as without prefetching.

A chain that fails stops; its job meets the same failure and records or reports it as
usual. An error that would fail every call (a rejected key) stops the prefetching.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import InitVar, dataclass, field

from kora.benchmarks.templates import prompts_from
from kora.llm.shared_calls import RunStopping
from kora.run.broker.walk import Walk
from kora.run.jobs.context import JobContext, Pool, RunSettings
from kora.run.jobs.shard_run import stops_the_job
from kora.run.stages.base import Job
from kora.run.stages.registry import STAGES
from kora.run.transport.jobspec import JobSpec

log = logging.getLogger("kora.run.broker.prefetch")

# units (each a few dependent calls) in flight at once: enough to keep a fast provider
# busy at its limit with slow answers; the limiter paces them. 300 req/s at 1.5 s is 450
# calls in flight, and between two stages fewer units are ready than run: 512 held a
# 300 req/s run at 0.84 of it, 1024 at 0.86-0.87 (bench/README.md)
STEPS_IN_FLIGHT = 1024
# grid cells walked at once. A cell is about 140 calls along a chain of 11 dependent
# answers, so at 1.5 s an answer it asks at most some 8 calls a second: 64 cells keep 500
# req/s asked for ahead of the jobs (which make calls of their own besides). The full v1
# grid walked all its 750 cells together and held every scenario and conversation at
# once: the broker's peak was 694 MB, and 290-338 MB with a window of 32 to 128 cells
# (bench/README.md, "Memory (issue 39, goal 3)")
CELLS_IN_FLIGHT = 64


@dataclass
class Prefetch:
    """The run's shard jobs, their calls made ahead unit by unit."""

    pool: Pool
    specs: InitVar[list[JobSpec]]
    walk: Walk = field(init=False)
    steps: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(STEPS_IN_FLIGHT))
    stopped: BaseException | None = None
    done: int = 0
    failed: int = 0

    def __post_init__(self, specs: list[JobSpec]) -> None:
        self.walk = Walk(self, self._job, cells_at_once=CELLS_IN_FLIGHT).add(specs)

    def _job(self, spec: JobSpec) -> Job | None:
        """The cell's job, made as the walk reaches its cell; None (left out) when its
        spec cannot make one: its own job meets the same error and reports it."""
        try:
            return STAGES[spec.rule].job(
                spec, JobContext(self.pool, RunSettings(**spec.settings), ahead=True)
            )
        except Exception as exc:
            log.info("%s: left to its job: %s: %s", spec.rule, type(exc).__name__, exc)
            return None

    async def run(self) -> None:
        await self.walk.run()
        log.info("made ahead: %d steps done, %d stopped", self.done, self.failed)

    async def visit(self, job: Job, unit: object) -> object:
        """One unit's calls, under the job's prompts; None if it failed (its job meets the
        same failure and records or reports it as usual)."""
        if self.stopped is not None or not job.replayable:
            return None
        async with self.steps:
            try:
                with prompts_from(job.prompts_dir):
                    result = await job.stage.work(job, unit)
            except RunStopping as exc:  # the run is being stopped: nothing more ahead
                self.stopped = exc
                return None
            except Exception as exc:
                self.failed += 1
                if stops_the_job(exc):
                    self.stopped = exc
                    log.error("stopped making calls ahead: %s", exc)
                else:
                    log.info("%s: left to its job: %s: %s", job.stage.name, type(exc).__name__, exc)
                return None
        self.done += 1
        return result

    def unknown(self, job: Job, count: int) -> None:
        return None  # what failed ahead is its job's to report
