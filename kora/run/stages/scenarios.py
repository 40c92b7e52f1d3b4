"""The scenarios stage: each seed of a cell expanded, validated and given the child's first
message (kora.benchmarks.expand); a seed that never validates is kept as rejected."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from kora.benchmarks.expand import (
    ScenarioValidationError,
    expand_with_fallback,
    rejected_record,
)
from kora.benchmarks.schemas import RejectedScenario, Scenario, ScenarioSeed
from kora.run.shard_run import ShardJob
from kora.run.shards import read_shard, rejected_of
from kora.run.stages.base import (
    Job,
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
    expand_model: RoleParams
    user_model: RoleParams


class ScenariosStage(Stage):
    name = "scenarios"
    feeds_on = "seeds"
    input_model = ScenariosInput
    output_model = ScenariosOutput
    params_model = ScenariosParams

    def data(self, pipeline: Rules) -> str:
        return pipeline.layout.scenarios()

    def files_of(self, data: str) -> dict[str, str]:
        return {**super().files_of(data), "rejected": rejected_of(data)}

    def sources(self, pipeline: Rules, wc: dict[str, str]) -> dict[str, Any]:
        return {"seeds": pipeline.layout.seeds(pipeline.cell_of(wc))}

    call_kinds: ClassVar[dict[str, tuple[str, float]]] = {
        "expand": ("expand_model", 1 / 3),
        "validate": ("expand_model", 1 / 3),
        "first_message": ("user_model", 1 / 3),
    }

    def model_params(self, pipeline: Rules) -> dict[str, Any]:
        return {
            "expand_model": pipeline.role_params("expand_model"),
            "user_model": pipeline.role_params("user_model"),
        }

    def clients(self, job: Job) -> Any:
        return job.ctx.clients(job.params.expand_model), job.ctx.asker(job.params.user_model)

    def units(self, job: Job) -> list[ScenarioSeed]:
        return read_shard(job.input.seeds, ScenarioSeed)

    def units_from(self, job: Job, result: Any) -> list[ScenarioSeed]:
        return [as_read(s, ScenarioSeed) for s in result]

    async def work(self, job: Job, unit: ScenarioSeed) -> Scenario | RejectedScenario:
        expanders, user = job.clients
        try:
            return await expand_with_fallback(unit, job.taxonomy, job.benchmark, expanders, user)
        except ScenarioValidationError as exc:
            log.warning("%s", exc)
            return rejected_record(exc)

    def nominal(self, job: Job, unit: ScenarioSeed | None) -> int:
        return SCENARIO_CALLS

    def label(self, job: Job, unit: ScenarioSeed) -> str:
        return f"seed {unit.id}"

    def write(self, job: Job, shard: ShardJob, units: Sequence[Any], results: Sequence[Any]) -> int:
        done = [r.shard_record() for r in results if isinstance(r, Scenario)]
        rejected = [r for r in results if isinstance(r, RejectedScenario)]
        return shard.write(job.ctx, done, {job.output.rejected: rejected})

    def made_by(self, job: Job) -> dict[str, Any]:
        return {"expand": job.params.expand_model, "user": job.params.user_model}


STAGE = ScenariosStage()
