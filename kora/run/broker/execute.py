"""How a rule's job runs from its spec (what kora.run.broker.dispatch sends from the rule's
script: the rule name and its input, output, params and log), in the run's broker or in
the job's own process (`run_here`): a shard stage's job through its stage
(kora.run.stages), a gathering job through its entry (kora.run.jobs.gather). Errors a user can
act on become the job's message, not a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

from kora.benchmarks.layout import PLACE, cell_log
from kora.benchmarks.templates import prompts_from
from kora.errors import KoraError
from kora.run.jobs.context import JobContext, Pool, RunSettings
from kora.run.jobs.gather import GATHERING_RULES
from kora.run.jobs.shard_run import FatalProviderError
from kora.run.stages.base import declared
from kora.run.stages.registry import STAGES
from kora.run.transport.joblog import job_log
from kora.run.transport.jobspec import JobSpec
from kora.run.transport.reply import Outcome
from kora.run.workflow.risk_jobs import split

log = logging.getLogger("kora")


async def execute(spec: JobSpec, pool: Pool, where: str = "its own") -> Outcome:
    """Run one job from its spec, each of its cells side by side (kora.run.workflow.risk_jobs); errors
    a user can act on become a message, not a traceback (anything else is a bug and
    propagates). The job fails if a cell does, and says each different message once (a
    rejected key stops every cell alike). The cells of every job the process serves take
    turns (kora.run.jobs.context.CELLS_AT_ONCE)."""
    cells = split(spec)
    if "cells" not in spec.params:
        return await _execute(cells[0], pool, where)
    # the job's own log (the one its rule declares) says where each cell's is and which
    # failed; each cell logs its work in its own
    with job_log(spec.log[0] if spec.log else None):
        log.info("%s job of %d cells in process %d (%s)", spec.rule, len(cells), os.getpid(), where)
        outcomes = await asyncio.gather(*(_execute(c, pool, where) for c in cells))
        for cell, outcome in zip(cells, outcomes, strict=True):
            if outcome.status:
                log.error("%s: %s", cell.log[0] if cell.log else "a cell", outcome.message)
        failed = sum(1 for o in outcomes if o.status)
        log.info(
            "%d of %d cells done; each cell's log: %s",
            len(cells) - failed,
            len(cells),
            cell_log(spec.log[0], PLACE) if spec.log else "-",
        )
    messages = list(dict.fromkeys(o.message for o in outcomes if o.message))
    return Outcome(max(o.status for o in outcomes), "\n".join(messages))


async def _execute(spec: JobSpec, pool: Pool, where: str) -> Outcome:
    async with pool.cells:
        return await _execute_cell(spec, pool, where)


async def _execute_cell(spec: JobSpec, pool: Pool, where: str) -> Outcome:
    rule = spec.rule
    with job_log(spec.log[0] if spec.log else None):
        started = time.monotonic()
        ctx = JobContext(pool, RunSettings(**spec.settings))
        log.info("%s job in process %d (%s)", rule, os.getpid(), where)
        try:
            if rule in STAGES:
                job = STAGES[rule].job(spec, ctx)
                with prompts_from(job.prompts_dir):
                    status = await job.stage.run(job)
            else:
                status = await _gather(rule, spec, ctx)
        except (FatalProviderError, KoraError) as exc:
            return _stopped(spec, str(exc))
        except OSError as exc:  # a full disk, say: every file is whole or not there
            where = f"{exc.filename}: " if exc.filename else ""
            return _stopped(spec, f"{where}{exc.strerror or exc}")
        finally:
            await ctx.aclose()
        log.info("finished in %.1f s", time.monotonic() - started)
        return Outcome(status)


def _stopped(spec: JobSpec, why: str) -> Outcome:
    """A job's stop, in its log and on the run's screen. The screen's line names the job's
    log: when a budget stops ten jobs at once, their ten lines say which job each is."""
    log.error("stopped: %s", why)
    job = f"{spec.rule} job ({spec.log[0]})" if spec.log else f"{spec.rule} job"
    return Outcome(1, f"kora: {job} stopped: {why}")


def run_here(spec: JobSpec) -> Outcome:
    """Run one job in this process (no broker serves it)."""

    async def main() -> Outcome:
        pool = Pool(Path.cwd())
        try:
            return await execute(spec, pool)
        finally:
            await pool.aclose()

    return asyncio.run(main())


async def _gather(rule: str, spec: JobSpec, ctx: JobContext) -> int:
    entry = GATHERING_RULES[rule]
    inputs = declared(rule, entry.input, spec.input)
    outputs = declared(rule, entry.output, spec.output)
    params = declared(rule, entry.params, spec.params)
    return await entry.run(inputs, outputs, params, ctx)
