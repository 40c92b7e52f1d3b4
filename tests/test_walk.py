"""The run's walk of its shard jobs (kora.run.walk): the prefetch walks a window of grid
cells at a time, so what it holds does not grow with the grid."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from kora.run.walk import Walk


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


def seed_jobs(cells: int) -> list[Any]:
    """A seeds job in each cell (the first stage: its units from its own inputs)."""
    stage = SimpleNamespace(
        name="seeds", feeds_on=None, by_target=False, units=lambda job: ["a", "b", "c"]
    )
    return [SimpleNamespace(cell=f"cell-{i:03d}", stage=stage, target=None) for i in range(cells)]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("window", [None, 1, 4])
def test_the_prefetch_walks_a_window_of_cells_and_every_unit_of_each(window: int | None) -> None:
    visitor = Counting()
    walk = Walk(visitor, cells_at_once=window).add(seed_jobs(20))
    asyncio.run(walk.run())
    assert sorted(visitor.visited) == sorted((f"cell-{i:03d}", u) for i in range(20) for u in "abc")
    # no window: every cell at once, as a full grid's 750 were
    assert visitor.most == (20 if window is None else window)
    if window is not None:  # cells are taken in order, a new one as one ends
        firsts = [cell for cell, _ in visitor.visited]
        assert sorted(dict.fromkeys(firsts)) == list(dict.fromkeys(firsts))


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("window", "targets", "most"), [(8, 1, 8), (8, 4, 2), (2, 4, 1)])
def test_a_run_of_several_targets_walks_as_many_targets_cells_at_once(
    window: int, targets: int, most: int
) -> None:
    """A cell holds every target's conversations: the window counts a cell once per target,
    so the prefetch holds as many conversations whatever the number of targets."""
    stage = SimpleNamespace(
        name="conversations", feeds_on=None, by_target=True, units=lambda job: ["a", "b"]
    )
    jobs = [
        SimpleNamespace(cell=f"cell-{i:03d}", stage=stage, target=f"target-{t}")
        for i in range(12)
        for t in range(targets)
    ]
    visitor = Counting()
    asyncio.run(Walk(visitor, cells_at_once=window).add(jobs).run())
    assert len(visitor.visited) == 12 * targets * 2
    assert visitor.most == most


@pytest.mark.timeout(30)
def test_the_plan_walks_one_unit_after_another_whatever_the_window() -> None:
    visitor = Counting()
    walk = Walk(visitor, concurrent=False, cells_at_once=4).add(seed_jobs(5))
    asyncio.run(walk.run())
    assert visitor.most == 1 and len(visitor.visited) == 15
