"""The judgments stage: each conversation of a target's cell graded by every judge, as the
run's benchmark version judges (its criteria, its way of combining judges)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kora.benchmarks.base import Benchmark
from kora.benchmarks.judging import unjudged
from kora.benchmarks.outcomes import Conversation, Judgment
from kora.run.shard_run import ShardJob
from kora.run.shards import read_shard
from kora.run.stages.base import Job, Rules, ShardParams, Sources, Stage, as_read


class JudgmentsInput(Sources):
    conversations: Path


class JudgmentsParams(ShardParams):
    target: str
    judges: list[dict[str, Any]]


class JudgmentsStage(Stage):
    name = "judgments"
    feeds_on = "conversations"
    by_target = True
    input_model = JudgmentsInput
    params_model = JudgmentsParams

    def data(self, pipeline: Rules) -> str:
        return pipeline.layout.judgments()

    def sources(self, pipeline: Rules, wc: dict[str, str]) -> dict[str, Any]:
        return {"conversations": pipeline.layout.conversations(wc["target"], pipeline.cell_of(wc))}

    def calls(self, benchmark: Benchmark) -> dict[str, tuple[str, float]]:
        """One call a judge per template its version judges with (v1: safety, then
        behaviour; v2: safety, then mechanisms)."""
        judged = benchmark.stage_templates["judgments"]
        return {kind: ("judges", 1 / len(judged)) for kind in judged}

    def model_params(self, pipeline: Rules) -> dict[str, Any]:
        return {"target": lambda wc: wc.target, "judges": pipeline.judges_params()}

    def clients(self, job: Job) -> Any:
        return [job.ctx.client(j) for j in job.params.judges]

    def conversations(self, job: Job) -> list[Conversation]:
        return read_shard(job.input.conversations, Conversation)

    def units(self, job: Job) -> list[Conversation]:
        # a conversation that failed upstream is carried as a failed judgment, not re-judged
        return [c for c in self.conversations(job) if c.error is None]

    def units_from(self, job: Job, result: Any) -> list[Conversation]:
        if not isinstance(result, Conversation) or result.error is not None:
            return []
        return [as_read(result, Conversation)]

    async def work(self, job: Job, unit: Conversation) -> Judgment:
        return await job.benchmark.judging(unit, job.clients, job.taxonomy)

    def nominal(self, job: Job, unit: Conversation | None) -> int:
        return job.benchmark.judge_calls * len(job.params.judges)

    def label(self, job: Job, unit: Conversation) -> str:
        return unit.key

    def write(self, job: Job, shard: ShardJob, units: Sequence[Any], results: Sequence[Any]) -> int:
        by_key = dict(zip((c.key for c in units), results, strict=True))
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

    def made_by(self, job: Job) -> dict[str, Any]:
        return {"judges": job.params.judges}


STAGE = JudgmentsStage()
