"""The two routes of a local run's calls (docs/architecture.md, "Two routes to the socket").

The run's broker walks every shard job ahead of it (kora.run.broker.prefetch, kora.run.broker.walk): each
unit's calls are made as soon as the unit is known, its units handed on in memory from the
unit before. Then each Snakemake job runs, reads its units from its input files and makes
the same calls, which the call store (or the call in flight) answers. The contract: a
stage's requests are byte for byte the same on both routes. A stage that breaks it makes
the run pay twice, once ahead and once in its job, and nothing else shows it.

Here both routes run on the mock grid, each with a call store of its own, and the requests
of each stage are compared: a stage whose requests differ fails, by its name."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from contextvars import ContextVar
from pathlib import Path

import pytest
import yaml

from kora.benchmarks.outcomes import Conversation
from kora.llm.base import Provider, Request, Response
from kora.llm.providers.mock import MockProvider
from kora.llm.settings.config import ModelConfig
from kora.llm.store.cache import CallCache, cache_key
from kora.run.broker.execute import execute
from kora.run.broker.prefetch import Prefetch
from kora.run.jobs.context import Pool
from kora.run.plan import target_jobs
from kora.run.stages import ORDER
from kora.run.stages.base import Job
from kora.run.stages.judgments import JudgmentsJob, JudgmentsStage
from kora.run.transport.jobspec import JobSpec
from kora.run.workflow.pipeline import Pipeline
from tests.helpers import copy_workflow
from tests.workflows import TINY

# the stage whose unit is making a call, on either route
STAGE: ContextVar[str] = ContextVar("stage")
Requests = dict[str, set[str]]  # stage -> the keys of the requests it made


class Recorded:
    """A provider whose every request is noted under the stage making it."""

    def __init__(self, name: str, inner: Provider, seen: Requests) -> None:
        self.name, self.inner, self.seen = name, inner, seen

    async def generate(self, request: Request) -> Response:
        self.seen[STAGE.get()].add(cache_key({"model": self.name}, request))
        return await self.inner.generate(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def pool(workdir: Path, store: str, models: dict[str, ModelConfig]) -> tuple[Pool, Requests]:
    """The jobs' pool, its call store `store`, every model the offline mock (the grid calls
    only `mock`: nothing reaches the network whatever a stage asks), each request noted."""
    seen: Requests = defaultdict(set)
    fixed: dict[str, Provider] = {
        n: Recorded(n, MockProvider(n, m), seen) for n, m in models.items()
    }
    return Pool(workdir, fixed=fixed, store=CallCache(workdir / store)), seen


class Ahead(Prefetch):
    """The broker's look-ahead, noting the stage of each unit it works."""

    async def visit(self, job: Job, unit: object) -> object:
        STAGE.set(job.stage.name)
        return await super().visit(job, unit)


async def ahead(specs: list[JobSpec], workdir: Path, models: dict[str, ModelConfig]) -> Requests:
    """The look-ahead's route: every unit walked from stage to stage, nothing written."""
    p, seen = pool(workdir, "ahead-store", models)
    prefetch = Ahead(p, specs)
    try:
        await prefetch.run()
    finally:
        await p.aclose()
    assert prefetch.failed == 0 and prefetch.stopped is None
    return seen


async def by_jobs(specs: list[JobSpec], workdir: Path, models: dict[str, ModelConfig]) -> Requests:
    """The jobs' route: each stage's jobs in turn, each reading what the last wrote."""
    p, seen = pool(workdir, "jobs-store", models)
    try:
        for stage in ORDER:
            STAGE.set(stage)
            for spec in (s for s in specs if s.rule == stage):
                outcome = await execute(spec, p)
                assert outcome.status == 0, outcome.message
    finally:
        await p.aclose()
    return seen


def parted(ahead: Requests, jobs: Requests) -> list[str]:
    """Each stage whose requests differ between the two routes, and how."""
    return [
        f"{stage}: {len(ahead[stage] - jobs[stage])} requests made ahead that its jobs do "
        f"not make, {len(jobs[stage] - ahead[stage])} its jobs make that were not made ahead"
        for stage in ORDER
        if ahead[stage] != jobs[stage]
    ]


def both_routes(workdir: Path, config: dict[str, object]) -> tuple[Requests, Requests]:
    copy_workflow(workdir)
    (workdir / "tiny.yaml").write_text(yaml.safe_dump(config))
    pipeline = Pipeline.load([workdir / "tiny.yaml"], workdir)
    specs = target_jobs(pipeline, ["tiny"])  # the mock target (not config.yaml's)
    models = pipeline.config.models
    return asyncio.run(ahead(specs, workdir, models)), asyncio.run(by_jobs(specs, workdir, models))


V2 = {
    **TINY,
    "benchmark": "v2",
    "grid": {
        "risks": ["grooming_and_manipulation", "cybersecurity"],
        "total_seeds": 4,
        "distribution": "us-census-2020",
        "random_seed": 7,
    },
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("config", [TINY, V2], ids=["v1", "v2"])
def test_each_stage_makes_the_same_requests_ahead_and_in_its_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, object]
) -> None:
    monkeypatch.chdir(tmp_path)  # the jobs read and write relative to the project
    made_ahead, made_by_jobs = both_routes(tmp_path, config)
    assert parted(made_ahead, made_by_jobs) == []
    assert all(made_ahead[stage] for stage in ORDER)  # every stage made calls


@pytest.mark.timeout(120)
def test_a_stage_that_asks_otherwise_ahead_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judgments stage whose hand-over from the conversations (what the look-ahead
    walks) is not what the conversations' file gives its job: the check names it, and only
    it (nothing is made from a judgment)."""
    monkeypatch.chdir(tmp_path)
    handed_on = JudgmentsStage.units_from

    def otherwise(self: JudgmentsStage, job: JudgmentsJob, result: object) -> list[Conversation]:
        # the transcript as the conversation made it, its last line's spaces kept
        units = handed_on(self, job, result)
        for c in units:
            c.messages[-1] = c.messages[-1].model_copy(
                update={"content": c.messages[-1].content + " "}
            )
        return units

    monkeypatch.setattr(JudgmentsStage, "units_from", otherwise)
    made_ahead, made_by_jobs = both_routes(tmp_path, TINY)
    found = parted(made_ahead, made_by_jobs)
    assert [line.split(":")[0] for line in found] == ["judgments"], found
