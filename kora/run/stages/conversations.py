"""The conversations stage: each scenario of a cell, once per prompt variant of the target,
talked through between the simulated child and the target (kora.benchmarks.converse); or,
for a continued target, its recordings carried on to the risk's length."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

from kora.benchmarks.converse import conversation_calls, converse, turn_calls
from kora.benchmarks.outcomes import Conversation, Message
from kora.benchmarks.schemas import PromptVariant, Scenario
from kora.benchmarks.testkeys import TestKey
from kora.llm.base import BlockedError
from kora.llm.chain import Asker
from kora.llm.registry import kind_of
from kora.llm.targets import Target
from kora.run.jobs.shard_run import ShardJob
from kora.run.jobs.shards import read_shard
from kora.run.stages.base import (
    Done,
    Job,
    Role,
    RoleParams,
    Rules,
    Sources,
    Stage,
    TargetParams,
    as_read,
)

# (scenario, prompt variant, recorded messages to carry on or None)
Test = tuple[Scenario, PromptVariant, list[Message] | None]


class ConversationsInput(Sources):
    # one of the two: the cell's scenarios, or a continued target's recordings
    scenarios: Path | None = None
    recorded: Path | None = None


class ConversationsParams(TargetParams):
    target_model: Annotated[dict[str, Any], Role("target", "target", {"target": 0.6})]
    prompts: list[PromptVariant]
    user_model: Annotated[RoleParams, Role("user_model", "user", {"child": 0.4})]
    scenarios: str  # which scenario set (generated or an import): a switch re-runs the job


class ConversationsJob(Job):
    input: ConversationsInput
    params: ConversationsParams

    @cached_property
    def clients(self) -> tuple[Target, Asker]:
        return self.ctx.target(self.params.target_model), self.ctx.asker(self.params.user_model)

    @property
    def replayable(self) -> bool:
        # a chat service's replies are not stored (a stateful service could not replay them)
        return not kind_of(self.params.target_model["provider"]).is_service


class ConversationsStage(Stage[ConversationsJob, Test, Conversation]):
    name = "conversations"
    feeds_on = "scenarios"
    job_type = ConversationsJob

    def data(self, pipeline: Rules) -> str:
        return pipeline.layout.conversations()

    def sources(self, pipeline: Rules, wc: dict[str, str]) -> dict[str, str]:
        return pipeline.conversations_sources(wc)

    def own_params(self, pipeline: Rules) -> dict[str, object]:
        return {
            "prompts": lambda wc: pipeline.config.target_prompts(wc.target),
            "scenarios": lambda wc: pipeline.conversation_source(wc.target),
        }

    def continued(self, job: ConversationsJob) -> bool:
        """Whether the job carries on recordings rather than tests made from scenarios."""
        return job.input.recorded is not None

    def units(self, job: ConversationsJob) -> list[Test]:
        prompts = job.params.prompts
        if job.input.recorded is not None:
            recorded = read_shard(job.input.recorded, Conversation)
            return [(r.scenario, r.prompt, r.messages) for r in recorded if r.prompt in prompts]
        assert job.input.scenarios is not None
        return [(s, p, None) for s in read_shard(job.input.scenarios, Scenario) for p in prompts]

    def units_from(self, job: ConversationsJob, result: object) -> list[Test]:
        if not isinstance(result, Scenario) or self.continued(job):
            return []
        scenario = as_read(result, Scenario)
        return [(scenario, p, None) for p in job.params.prompts]

    def fanout(self, job: ConversationsJob) -> int:
        return 0 if self.continued(job) else len(job.params.prompts)

    async def work(self, job: ConversationsJob, unit: Test) -> Conversation:
        target, user = job.clients
        scenario, prompt, start = unit
        return await converse(
            scenario, prompt, job.params.target, target, user, job.taxonomy, start
        )

    def nominal(self, job: ConversationsJob, unit: Test | None) -> int:
        if unit is None:  # a scenario not made yet: its risk's length, no flavor's
            risk = job.taxonomy.risks[job.params.cell.risk][1]
            return turn_calls(risk.turns())
        scenario, _, start = unit
        return conversation_calls(job.taxonomy, scenario, len(start or []) // 2)

    def label(self, job: ConversationsJob, unit: Test) -> str:
        return f"{unit[0].id}:{unit[1]}"

    def write(self, job: ConversationsJob, shard: ShardJob, done: Done[Test, Conversation]) -> int:
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
            for (scenario, prompt, _), r in done
        ]
        return shard.write(job.ctx, records)


STAGE = ConversationsStage()
