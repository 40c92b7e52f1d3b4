"""The run's walk of its shard jobs (kora.run.broker.walk): the prefetch walks a window of grid
cells at a time, so what it holds does not grow with the grid."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from kora.run.broker.walk import Walk
from kora.run.transport.jobspec import JobSpec


class Counting:
    """A visitor that notes which cells have a unit under way at once."""

    def __init__(self) -> None:
        self.under_way: dict[str, int] = {}
        self.most = 0
        self.visited: list[tuple[str, Any]] = []

    async def visit(self, job: Any, unit: Any) -> Any:
        self.under_way[job.cell] = self.under_way.get(job.cell, 0) + 1
        self.most = max(self.most, len(self.under_way))
        for _ in range(3):  # let every other unit that can start, start
            await asyncio.sleep(0)
        self.under_way[job.cell] -= 1
        if not self.under_way[job.cell]:
            del self.under_way[job.cell]
        self.visited.append((job.cell, unit))
        return unit

    def unknown(self, job: Any, count: int) -> None:
        raise AssertionError("the prefetch knows every unit")


def spec(rule: str, i: int, target: str | None = None) -> JobSpec:
    """A shard job's spec in the i-th cell (one age range, one motivation per cell)."""
    params: dict[str, Any] = {"cell": {"risk": "r", "age": "7to9", "motivation": f"m{i:03d}"}}
    if target is not None:
        params["target"] = target
    return JobSpec(rule, {}, {}, params, [], {})


class Jobs:
    """Makes each spec's job (its units as given), and counts those made and not closed."""

    def __init__(self, units: list[str], by_target: bool = False, name: str = "seeds") -> None:
        self.stage = SimpleNamespace(
            name=name, feeds_on=None, by_target=by_target, units=lambda job: units
        )
        self.open = 0
        self.most_open = 0
        self.made = 0

    def __call__(self, spec: JobSpec) -> Any:
        self.made += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)

        async def aclose() -> None:
            self.open -= 1

        cell = spec.params["cell"]
        return SimpleNamespace(
            cell=f"{cell['risk']}/{cell['age']}/{cell['motivation']}",
            stage=self.stage,
            target=spec.params.get("target"),
            ctx=SimpleNamespace(aclose=aclose),
        )


def seed_specs(cells: int) -> list[JobSpec]:
    """A seeds job in each cell (the first stage: its units from its own inputs)."""
    return [spec("seeds", i) for i in range(cells)]


def cell(i: int) -> str:
    return f"r/7to9/m{i:03d}"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("window", [None, 1, 4])
def test_the_prefetch_walks_a_window_of_cells_and_every_unit_of_each(window: int | None) -> None:
    visitor = Counting()
    walk = Walk(visitor, Jobs(["a", "b", "c"]), cells_at_once=window).add(seed_specs(20))
    asyncio.run(walk.run())
    assert sorted(visitor.visited) == sorted((cell(i), u) for i in range(20) for u in "abc")
    # no window: every cell at once, as a full grid's 750 were
    assert visitor.most == (20 if window is None else window)
    if window is not None:  # cells are taken in order, a new one as one ends
        firsts = [cell for cell, _ in visitor.visited]
        assert sorted(dict.fromkeys(firsts)) == list(dict.fromkeys(firsts))


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("window", "targets", "most"), [(8, 1, 8), (8, 2, 8), (8, 4, 4), (8, 16, 1), (2, 4, 1)]
)
def test_a_run_of_several_targets_walks_fewer_cells_at_once(
    window: int, targets: int, most: int
) -> None:
    """A cell holds every target's conversations: a run of N targets walks 2/N of the
    window's cells (at most the window), so the prefetch holds at most twice one target's
    conversations, and its child and judge still ask enough of the models all targets
    share."""
    make = Jobs(["a", "b"], by_target=True, name="conversations")
    specs = [spec("conversations", i, f"target-{t}") for i in range(12) for t in range(targets)]
    visitor = Counting()
    asyncio.run(Walk(visitor, make, cells_at_once=window).add(specs).run())
    assert len(visitor.visited) == 12 * targets * 2
    assert visitor.most == most


@pytest.mark.timeout(30)
def test_the_plan_walks_one_unit_after_another_whatever_the_window() -> None:
    visitor = Counting()
    walk = Walk(visitor, Jobs(["a", "b", "c"]), concurrent=False, cells_at_once=4)
    asyncio.run(walk.add(seed_specs(5)).run())
    assert visitor.most == 1 and len(visitor.visited) == 15


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("window", "concurrent"), [(4, True), (None, False)])
def test_a_cells_jobs_are_made_as_it_starts_and_let_go_as_it_ends(
    window: int | None, concurrent: bool
) -> None:
    """What the walk holds does not grow with the grid: a cell's jobs (their params, their
    clients) exist only while it is walked, the whole grid's never at once."""
    make = Jobs(["a", "b"])
    walk = Walk(Counting(), make, concurrent=concurrent, cells_at_once=window)
    asyncio.run(walk.add(seed_specs(30)).run())
    assert make.made == 30
    assert make.open == 0  # every context closed
    assert make.most_open == (window if concurrent else 1)
    assert not walk.cells  # the specs let go too


@pytest.mark.timeout(30)
def test_a_cancelled_walk_closes_the_jobs_under_way() -> None:
    make = Jobs(["a"])
    started = asyncio.Event()

    class Stuck:
        async def visit(self, job: Any, unit: Any) -> Any:
            started.set()
            await asyncio.Event().wait()  # never answered: the run is stopped

        def unknown(self, job: Any, count: int) -> None:
            raise AssertionError

    async def main() -> None:
        task = asyncio.create_task(Walk(Stuck(), make, cells_at_once=3).add(seed_specs(10)).run())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert make.made == 3 and make.open == 0


@pytest.mark.timeout(30)
def test_a_risks_job_handed_over_whole_is_walked_as_its_cells_own_jobs() -> None:
    """The run hands the broker each risk's job as one spec of its cells (kora.run.workflow.risk_jobs):
    the walk makes each cell's job from that cell's own spec, as its cell comes."""
    cells = [{"cell": {"risk": "r", "age": "7to9", "motivation": f"m{i:03d}"}} for i in range(6)]
    job = JobSpec(
        "seeds",
        {"taxonomy": ["t.json"], "other": "in/r"},
        {"shards": "out/r"},
        {"benchmark": "v1", "cells": cells},
        ["logs/r.log"],
        {},
    )
    made: list[JobSpec] = []
    make = Jobs(["a"])

    def making(spec: JobSpec) -> Any:
        made.append(spec)
        return make(spec)

    visitor = Counting()
    asyncio.run(Walk(visitor, making, cells_at_once=2).add([job]).run())
    assert sorted(c for c, _ in visitor.visited) == [cell(i) for i in range(6)]
    assert make.most_open == 2
    for spec in made:
        i = int(spec.params["cell"]["motivation"][1:])
        shard = f"7to9/m{i:03d}"
        assert spec.output == {
            "data": f"out/r/{shard}.jsonl", "status": f"out/r/{shard}.status.json"
        }  # fmt: skip
        assert spec.log == [f"logs/r/{shard}.log"]
        assert spec.input == {"taxonomy": ["t.json"], "other": f"in/r/{shard}.jsonl"}
        assert spec.params == {"benchmark": "v1", **cells[i]}


@pytest.mark.timeout(30)
def test_a_spec_the_prefetch_cannot_make_a_job_of_is_left_to_its_job(tmp_path: Any) -> None:
    """A cell whose spec makes no job (here its inputs are not a seeds job's) is left out
    of the calls made ahead, which go on for the other cells: its own job meets the same
    error and reports it."""
    from kora.run.broker.prefetch import Prefetch
    from kora.run.jobs.context import Pool

    made = Jobs(["a"])
    bad = JobSpec("seeds", {"nonsense": 1}, {}, spec("seeds", 0).params, [], {})
    prefetch = Prefetch(Pool(tmp_path), [bad, spec("seeds", 1)])
    prefetch.walk.make = lambda s: made(s) if s is not bad else prefetch._job(s)
    visitor = Counting()
    prefetch.walk.visitor = visitor
    asyncio.run(prefetch.run())
    assert visitor.visited == [(cell(1), "a")]
