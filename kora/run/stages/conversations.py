"""The conversations stage: each scenario of a cell, once per prompt variant of the target,
talked through between the simulated child and the target (kora.benchmarks.converse); or,
for a continued target, its recordings carried on to the risk's length."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from kora.benchmarks.converse import conversation_calls, converse, turn_calls
from kora.benchmarks.outcomes import Conversation, Message
from kora.benchmarks.schemas import PromptVariant, Scenario
from kora.benchmarks.testkeys import TestKey
from kora.llm.base import BlockedError
from kora.run.shard_run import ShardJob
from kora.run.shards import read_shard
from kora.run.stages.base import Job, RoleParams, Rules, ShardParams, Sources, Stage, as_read

# (scenario, prompt variant, recorded messages to carry on or None)
Test = tuple[Scenario, PromptVariant, list[Message] | None]


class ConversationsInput(Sources):
    # one of the two: the cell's scenarios, or a continued target's recordings
    scenarios: Path | None = None
    recorded: Path | None = None


class ConversationsParams(ShardParams):
    target: str
    target_model: dict[str, Any]
    prompts: list[PromptVariant]
    user_model: RoleParams
    scenarios: str  # which scenario set (generated or an import): a switch re-runs the job


class ConversationsStage(Stage):
    name = "conversations"
    feeds_on = "scenarios"
    by_target = True
    input_model = ConversationsInput
    params_model = ConversationsParams

    def data(self, pipeline: Rules) -> str:
        return pipeline.layout.conversations()

    def sources(self, pipeline: Rules, wc: dict[str, str]) -> dict[str, Any]:
        return pipeline.conversations_sources(wc)

    call_kinds: ClassVar[dict[str, tuple[str, float]]] = {
        "target": ("target", 0.6),
        "child": ("user_model", 0.4),
    }

    def model_params(self, pipeline: Rules) -> dict[str, Any]:
        return {
            "target": lambda wc: wc.target,
            "target_model": lambda wc: pipeline.target_model_params(wc.target),
            "prompts": lambda wc: pipeline.config.target_prompts(wc.target),
            "user_model": pipeline.role_params("user_model"),
            # generated, or which imported file: switching re-runs the conversations
            "scenarios": lambda wc: pipeline.conversation_source(wc.target),
        }

    def clients(self, job: Job) -> Any:
        return job.ctx.target(job.params.target_model), job.ctx.asker(job.params.user_model)

    def continued(self, job: Job) -> bool:
        """Whether the job carries on recordings rather than tests made from scenarios."""
        return job.input.recorded is not None

    def units(self, job: Job) -> list[Test]:
        prompts = job.params.prompts
        if job.input.recorded is not None:
            recorded = read_shard(job.input.recorded, Conversation)
            return [(r.scenario, r.prompt, r.messages) for r in recorded if r.prompt in prompts]
        assert job.input.scenarios is not None
        return [(s, p, None) for s in read_shard(job.input.scenarios, Scenario) for p in prompts]

    def units_from(self, job: Job, result: Any) -> list[Test]:
        if not isinstance(result, Scenario) or self.continued(job):
            return []
        scenario = as_read(result, Scenario)
        return [(scenario, p, None) for p in job.params.prompts]

    def fanout(self, job: Job) -> int:
        return 0 if self.continued(job) else len(job.params.prompts)

    async def work(self, job: Job, unit: Test) -> Conversation:
        target, user = job.clients
        scenario, prompt, start = unit
        return await converse(
            scenario, prompt, job.params.target, target, user, job.taxonomy, start
        )

    def nominal(self, job: Job, unit: Test | None) -> int:
        if unit is None:  # a scenario not made yet: its risk's length, no flavor's
            risk = job.taxonomy.risks[job.params.cell.risk][1]
            return turn_calls(risk.turns())
        scenario, _, start = unit
        return conversation_calls(job.taxonomy, scenario, len(start or []) // 2)

    def label(self, job: Job, unit: Test) -> str:
        return f"{unit[0].id}:{unit[1]}"

    def write(self, job: Job, shard: ShardJob, units: Sequence[Any], results: Sequence[Any]) -> int:
        records = [
            Conversation(
                key=str(TestKey.of(scenario, prompt)),
                target=job.params.target,
                prompt=prompt,
                scenario=scenario,
                error=f"{type(r).__name__}: {r}",
                blocked=r.reason if isinstance(r, BlockedError) else None,
            )
            if isinstance(r, BaseException)
            else r
            for (scenario, prompt, _), r in zip(units, results, strict=True)
        ]
        return shard.write(job.ctx, records)

    def made_by(self, job: Job) -> dict[str, Any]:
        return {"target": job.params.target_model, "user": job.params.user_model}


STAGE = ConversationsStage()
