"""The judgments stage: each conversation of a target's cell graded by every judge, as the
run's benchmark version judges (its criteria, its way of combining judges)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

from kora.benchmarks.base import Benchmark
from kora.benchmarks.judging import unjudged
from kora.benchmarks.outcomes import Conversation, Judgment
from kora.llm.client import ModelClient
from kora.run.jobs.shard_run import ShardJob
from kora.run.jobs.shards import read_shard
from kora.run.stages.base import Done, Job, Role, Rules, Sources, Stage, TargetParams, as_read


class JudgmentsInput(Sources):
    conversations: Path


class JudgmentsParams(TargetParams):
    # its kinds of call are its version's (`JudgmentsStage.calls`)
    judges: Annotated[list[dict[str, Any]], Role("judges", "judges")]


class JudgmentsJob(Job):
    input: JudgmentsInput
    params: JudgmentsParams

    @cached_property
    def clients(self) -> list[ModelClient]:
        return [self.ctx.client(j) for j in self.params.judges]


class JudgmentsStage(Stage[JudgmentsJob, Conversation, Judgment]):
    name = "judgments"
    feeds_on = "conversations"
    job_type = JudgmentsJob

    def data(self, pipeline: Rules) -> str:
        return pipeline.layout.judgments()

    def sources(self, pipeline: Rules, wc: dict[str, str]) -> dict[str, str]:
        return {"conversations": pipeline.layout.conversations(wc["target"], pipeline.cell_of(wc))}

    def calls(self, benchmark: Benchmark) -> dict[str, tuple[str, float]]:
        """One call a judge per template its version judges with (v1: safety, then
        behaviour; v2: safety, then mechanisms)."""
        judged = benchmark.stage_templates["judgments"]
        return {kind: ("judges", 1 / len(judged)) for kind in judged}

    def conversations(self, job: JudgmentsJob) -> list[Conversation]:
        return read_shard(job.input.conversations, Conversation)

    def units(self, job: JudgmentsJob) -> list[Conversation]:
        # a conversation that failed upstream is carried as a failed judgment, not re-judged
        return [c for c in self.conversations(job) if c.error is None]

    def units_from(self, job: JudgmentsJob, result: object) -> list[Conversation]:
        if not isinstance(result, Conversation) or result.error is not None:
            return []
        return [as_read(result, Conversation)]

    async def work(self, job: JudgmentsJob, unit: Conversation) -> Judgment:
        return await job.benchmark.judging(unit, job.clients, job.taxonomy)

    def nominal(self, job: JudgmentsJob, unit: Conversation | None) -> int:
        return job.benchmark.judge_calls * len(job.params.judges)

    def label(self, job: JudgmentsJob, unit: Conversation) -> str:
        return unit.key

    def write(self, job: JudgmentsJob, shard: ShardJob, done: Done[Conversation, Judgment]) -> int:
        by_key = {c.key: r for c, r in done}
        records = []
        for c in self.conversations(job):
            r = by_key.get(c.key)
            if r is None or isinstance(r, BaseException):
                error = (
                    f"conversation failed: {c.error}" if r is None else f"{type(r).__name__}: {r}"
                )
                r = unjudged(c).model_copy(update={"error": error, "blocked": c.blocked})
            records.append(r)
        return shard.write(job.ctx, records)


STAGE = JudgmentsStage()
