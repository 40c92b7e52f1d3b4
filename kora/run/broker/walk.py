"""The shard jobs of a run, walked unit by unit from stage to stage (kora.run.stages).

Within a grid cell, a stage's units come from the stage it feeds on: a seed call's seeds
are the scenarios job's units, a scenario is a test of each target, a conversation is its
judgment's unit. A stage whose upstream job is not part of the run reads its units from
its input files, as its job does. The walk hands each unit to a `Visitor`:

- the run's prefetch (kora.run.broker.prefetch) makes the unit's calls ahead of its job, so a
  local run keeps its provider busy;
- `kora plan` (kora.run.plan) replays them against the call store and counts them, and
  counts the units it cannot know yet at their nominal number of calls.

Both walk exactly what the jobs will do, because the units, the work and the hand-over
between stages are the stages' own.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kora.run.stages import ORDER
from kora.run.stages.base import Cell, Job
from kora.run.stages.registry import STAGES
from kora.run.transport.jobspec import JobSpec
from kora.run.workflow.risk_jobs import cell_count, cell_params, cell_spec


class Unknown:
    """A unit whose result cannot be known yet (`kora plan`): what it would hand on is
    counted, not walked."""


UNKNOWN = Unknown()


class Visitor(Protocol):
    async def visit(self, job: Job, unit: object) -> object:
        """The unit's result, None when it failed (nothing to hand on), or UNKNOWN."""

    def unknown(self, job: Job, count: int) -> None:
        """`count` units of `job` that cannot be known yet."""


@dataclass
class Walk:
    """The run's shard jobs by cell (and target), walked by one visitor."""

    visitor: Visitor
    # a job from its spec, with its context (None: left out of the walk)
    make: Callable[[JobSpec], Job | None]
    # run the units of a stage side by side (the prefetch) or one after another (the plan,
    # which counts each unit's calls on its own)
    concurrent: bool = True
    # side by side, the cells walked at once (None: all of them). A cell's results are
    # held until its last unit is done, so walking a full grid's 750 cells together held
    # the whole grid's scenarios and conversations at once; a window holds the same few
    # whatever the grid's size (bench/README.md, full_grid.py). A cell of a run of N
    # targets holds N targets' conversations and judgments (4 targets, 64 cells: the
    # broker held 433 MB against 189 MB for one, `full_grid.py --risks 3 --targets 4`),
    # so 2/N as many cells are walked, at most the window: twice one target's held at
    # once. Not 1/N: its child and judge make N targets' calls on the models all targets
    # share, and 16 cells of 4 targets ask at most some 280 of those a second against a
    # limit of 300; with 32, three pairs of runs ended 0.03-0.06 x the ideal sooner
    # (bench/README.md, "The shared limit of four targets")
    cells_at_once: int | None = None
    # each cell's jobs, as a job's spec and the cell's place in it, until the cell is
    # walked. Its jobs are made as it starts and let go (their contexts closed) as it
    # ends: a job holds its validated params and, once it has asked, its clients, which
    # across a whole grid's 3,000 jobs grew the broker by tens of MB over the run; and a
    # risk's spec is split into its 30 cells' only as each is walked (bench/README.md)
    cells: dict[str, list[tuple[JobSpec, int]]] = field(default_factory=lambda: defaultdict(list))
    # the jobs of the cells under way now
    _under_way: dict[str, dict[str, list[Job]]] = field(default_factory=dict)

    def add(self, specs: Iterable[JobSpec]) -> Walk:
        """Shard jobs' specs, each of one cell or of a risk's cells (kora.run.workflow.risk_jobs)."""
        for spec in specs:
            if spec.rule in STAGES:
                for i in range(cell_count(spec)):
                    cell = Cell.model_validate(cell_params(spec, i)["cell"]).path
                    self.cells[cell].append((spec, i))
        return self

    async def run(self) -> None:
        cells = sorted(self.cells)
        if self.cells_at_once is None or not self.concurrent:
            await self._all(self.cell(c) for c in cells)
            return
        targets = {s.params.get("target") for held in self.cells.values() for s, _ in held}
        n = max(1, len(targets - {None}))
        window = asyncio.Semaphore(max(1, min(self.cells_at_once, 2 * self.cells_at_once // n)))

        async def admitted(cell: str) -> None:
            async with window:
                await self.cell(cell)

        await self._all(admitted(c) for c in cells)

    async def cell(self, cell: str) -> None:
        stages: dict[str, list[Job]] = defaultdict(list)
        for spec, i in self.cells.pop(cell, []):
            job = self.make(cell_spec(spec, i))
            if job is not None:
                stages[job.stage.name].append(job)
        self._under_way[cell] = stages
        try:
            roots = [job for name in ORDER for job in stages.get(name, []) if not self._fed(job)]
            await self._all(self._root(job) for job in roots)
        finally:
            del self._under_way[cell]
            for jobs in stages.values():
                for job in jobs:
                    await job.ctx.aclose()

    def _fed(self, job: Job) -> bool:
        """Whether the job's units come from a job of this run (rather than its files)."""
        up = job.stage.feeds_on
        if up is None or not job.stage.fanout(job):
            return False
        found = self._under_way[job.cell].get(up, [])
        return any(j.target == job.target for j in found) if STAGES[up].by_target else bool(found)

    def _downstream(self, job: Job) -> list[Job]:
        names = [n for n in ORDER if STAGES[n].feeds_on == job.stage.name]
        found = [j for n in names for j in self._under_way[job.cell].get(n, [])]
        if job.stage.by_target:
            found = [j for j in found if j.target == job.target]
        return [j for j in found if j.stage.fanout(j)]

    async def _root(self, job: Job) -> None:
        await self._all(self._unit(job, u) for u in job.stage.units(job))

    async def _unit(self, job: Job, unit: object) -> None:
        result = await self.visitor.visit(job, unit)
        if result is None:
            return
        if isinstance(result, Unknown):
            self._unknown(job, job.stage.yields(job, unit))
            return
        await self._all(
            self._unit(down, u)
            for down in self._downstream(job)
            for u in down.stage.units_from(down, result)
        )

    def _unknown(self, job: Job, results: int) -> None:
        """`results` results of `job` not known yet: the units they would give below."""
        for down in self._downstream(job):
            units = results * down.stage.fanout(down)
            self.visitor.unknown(down, units)
            self._unknown(down, units)

    async def _all(self, work: Iterable[Awaitable[None]]) -> None:
        if self.concurrent:
            await asyncio.gather(*work)
            return
        for w in work:
            await w
