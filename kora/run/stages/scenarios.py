"""The scenarios stage: each seed of a cell expanded, validated and given the child's first
message (kora.benchmarks.expand); a seed that never validates is kept as rejected."""

from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path
from typing import Annotated

from kora.benchmarks.expand import (
    ScenarioValidationError,
    expand_with_fallback,
    rejected_record,
)
from kora.benchmarks.layout import rejected_of
from kora.benchmarks.schemas import RejectedScenario, Scenario, ScenarioSeed
from kora.llm.chain import Asker
from kora.llm.client import ModelClient
from kora.run.jobs.shard_run import ShardJob
from kora.run.jobs.shards import read_shard
from kora.run.stages.base import (
    Done,
    Job,
    Role,
    RoleParams,
    Rules,
    ShardOutput,
    ShardParams,
    Sources,
    Stage,
    as_read,
)

log = logging.getLogger("kora")
# expansion, validation and the child's first message, when the first draft validates
SCENARIO_CALLS = 3


class ScenariosInput(Sources):
    seeds: Path


class ScenariosOutput(ShardOutput):
    rejected: Path


class ScenariosParams(ShardParams):
    expand_model: Annotated[
        RoleParams, Role("expand_model", "expand", {"expand": 1 / 3, "validate": 1 / 3})
    ]
    user_model: Annotated[RoleParams, Role("user_model", "user", {"first_message": 1 / 3})]


class ScenariosJob(Job):
    input: ScenariosInput
    output: ScenariosOutput
    params: ScenariosParams

    @cached_property
    def clients(self) -> tuple[list[ModelClient], Asker]:
        return self.ctx.clients(self.params.expand_model), self.ctx.asker(self.params.user_model)


Made = Scenario | RejectedScenario


class ScenariosStage(Stage[ScenariosJob, ScenarioSeed, Made]):
    name = "scenarios"
    feeds_on = "seeds"
    job_type = ScenariosJob

    def data(self, pipeline: Rules) -> str:
        return pipeline.layout.scenarios()

    def files_of(self, data: str) -> dict[str, str]:
        return {**super().files_of(data), "rejected": rejected_of(data)}

    def sources(self, pipeline: Rules, wc: dict[str, str]) -> dict[str, str]:
        return {"seeds": pipeline.layout.seeds(pipeline.cell_of(wc))}

    def units(self, job: ScenariosJob) -> list[ScenarioSeed]:
        return read_shard(job.input.seeds, ScenarioSeed)

    def units_from(self, job: ScenariosJob, result: object) -> list[ScenarioSeed]:
        return [as_read(s, ScenarioSeed) for s in result] if isinstance(result, list) else []

    async def work(self, job: ScenariosJob, unit: ScenarioSeed) -> Made:
        expanders, user = job.clients
        try:
            return await expand_with_fallback(unit, job.taxonomy, job.benchmark, expanders, user)
        except ScenarioValidationError as exc:
            log.warning("%s", exc)
            return rejected_record(exc)

    def nominal(self, job: ScenariosJob, unit: ScenarioSeed | None) -> int:
        return SCENARIO_CALLS

    def label(self, job: ScenariosJob, unit: ScenarioSeed) -> str:
        return f"seed {unit.id}"

    def write(self, job: ScenariosJob, shard: ShardJob, done: Done[ScenarioSeed, Made]) -> int:
        made = [r.shard_record() for _, r in done if isinstance(r, Scenario)]
        rejected = [r for _, r in done if isinstance(r, RejectedScenario)]
        return shard.write(job.ctx, made, {job.output.rejected: rejected})


STAGE = ScenariosStage()
