"""One Snakemake job per risk (and target) for each shard stage, holding the risk's cells.

A Snakemake job costs about a quarter of a second of CPU whatever it does: a process, the
`script:` machinery, a round of the scheduler, the bookkeeping of its files. With one job
per (risk, age range, motivation) cell, a whole v1 grid is 3,001 jobs, and those costs were
most of a run's CPU at a high provider limit (bench/README.md, "Where the CPU goes"). So a
shard rule's job takes every cell of one risk.

What the job declares is the risk's folders, not its cells' files: its output is the
risk's folder of the stage (`directory()`), its sources are the risk's folders of the
stages it reads, and it has one log. Snakemake keeps objects, a metadata record and input
checksums for each declared path, and the cells' files were most of a whole grid's
Snakemake memory and CPU (kora.benchmarks.layout). Its params are the params every cell shares
plus `cells`, what differs from cell to cell (the cell, its retry token, a v2 seed plan's
orders). The job runs each cell exactly as a job of its own did (`split` gives each cell
its files in the folders, then kora.run.broker.execute), so every cell keeps its own records,
status file, log and retry token (kora.run.jobs.shards), and the broker's prefetch and `kora
plan` still walk cell by cell.

What a larger job gives up: a cell whose retry token changed (a failed item, a damaged or
missing shard) re-runs the whole risk's job; its other cells are answered from the call
store.
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterable
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from kora.benchmarks.layout import PLACE, cell_log, folder_of, job_log, risk_folder, shard_in
from kora.run.stages.base import Rules
from kora.run.stages.registry import STAGES
from kora.run.transport.jobspec import JobSpec

# the name of a shard job's one output: the risk's folder of its stage
FOLDER = "shards"


class Wildcards(SimpleNamespace):
    """Wildcards as a rule's param functions read them (attributes and `items()`)."""

    def items(self) -> ItemsView[str, str]:
        return vars(self).items()


def _cells(parts: Iterable[tuple[str, str]], wc: Wildcards) -> list[dict[str, str]]:
    base = dict(wc.items())
    return [{**base, "age": age, "motivation": m} for age, m in parts]


def outputs(pipeline: Rules, stage: str) -> str:
    """The job's output: the risk's folder of the stage (wildcards left in)."""
    return risk_folder(STAGES[stage].data(pipeline))


def logs(pipeline: Rules, stage: str) -> str:
    """The job's one log; each cell's own lies in a folder beside it."""
    return job_log(STAGES[stage].log(pipeline))


def inputs(
    pipeline: Rules, stage: str, parts: list[tuple[str, str]]
) -> Callable[[Wildcards], dict[str, str | list[str]]]:
    """The job's inputs: those every cell shares (the templates, the taxonomy: lists, as
    every shard rule declares them), and the risk's folder of each source (one file)."""

    def of(wc: Wildcards) -> dict[str, str | list[str]]:
        first = STAGES[stage].inputs(pipeline, _cells(parts[:1], wc)[0])
        return {k: v if isinstance(v, list) else str(folder_of(v)) for k, v in first.items()}

    return of


def params(pipeline: Rules, stage: str, parts: list[tuple[str, str]]) -> dict[str, object]:
    """The params every cell shares (values, or functions of the job's wildcards), and
    `cells`: each cell's own."""
    every = STAGES[stage].params(pipeline)
    per_cell = STAGES[stage].per_cell
    own = {k: v for k, v in every.items() if k in per_cell}

    def cells(wc: Wildcards) -> list[dict[str, object]]:
        out = []
        for c in _cells(parts, wc):
            w = Wildcards(**c)
            out.append({k: v(w) if callable(v) else v for k, v in own.items()})
        return out

    return {**{k: v for k, v in every.items() if k not in per_cell}, "cells": cells}


def cell_count(spec: JobSpec) -> int:
    """The cells a job's spec holds (a spec of one cell: 1)."""
    cells = spec.params.get("cells")
    return 1 if cells is None else len(cells)


def cell_params(spec: JobSpec, i: int) -> dict[str, Any]:
    """The params of the job's i-th cell: those every cell shares, and the cell's own."""
    shared = {k: v for k, v in spec.params.items() if k != "cells"}
    cells = spec.params.get("cells")
    return shared if cells is None else {**shared, **cells[i]}


def place(spec: JobSpec, i: int) -> str:
    """The i-th cell's place in its risk's folders: "<age>/<motivation>"."""
    cell = spec.params["cells"][i]["cell"]
    return PLACE.format(age=cell["age"], motivation=cell["motivation"])


def cell_spec(spec: JobSpec, i: int) -> JobSpec:
    """The i-th cell of a job's spec, as a job of that one cell would be."""
    if "cells" not in spec.params:
        return spec
    where = place(spec, i)
    stage = STAGES[spec.rule]
    folder = spec.output[FOLDER]
    assert isinstance(folder, str), "a risk's job declares one folder of shards"
    return replace(
        spec,
        input={k: v if isinstance(v, list) else shard_in(v, where) for k, v in spec.input.items()},
        output=stage.files_of(shard_in(folder, where)),
        params=cell_params(spec, i),
        log=[cell_log(spec.log[0], where)] if spec.log else [],
    )


def split(spec: JobSpec) -> list[JobSpec]:
    """A job's spec as the specs of its cells, each what a job of that one cell would be;
    a spec of one cell as it is."""
    return [cell_spec(spec, i) for i in range(cell_count(spec))]
