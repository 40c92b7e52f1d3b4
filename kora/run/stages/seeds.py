"""Seeds: one structured call per (risk, age range, motivation) shard; in a KORA v2 plan,
one call per planned seed order of the shard (kora.benchmarks.v2.plan)."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated

from kora.benchmarks.base import Benchmark
from kora.benchmarks.schemas import ScenarioSeed
from kora.benchmarks.seedplan import SeedOrder
from kora.benchmarks.taxonomy import Shard, Taxonomy
from kora.benchmarks.testkeys import stable_uuid4
from kora.llm.chain import Asker
from kora.run.jobs.shard_run import ShardJob
from kora.run.stages.base import Done, Job, Role, RoleParams, Rules, ShardParams, Stage

SeedCall = tuple[int | None, SeedOrder | None]


def seed_calls(orders: list[SeedOrder] | None) -> list[SeedCall]:
    """The seed calls of a shard: one without a plan, each planned order's with one
    (numbered, for the seeds' ids)."""
    return [(None, None)] if orders is None else list(enumerate(orders))


async def generate_seeds(
    shard: Shard,
    taxonomy: Taxonomy,
    benchmark: Benchmark,
    client: Asker,
    seeds_per_task: int,
    call: SeedCall = (None, None),
) -> list[ScenarioSeed]:
    order_index, order = call
    count = seeds_per_task if order is None else order.count
    category = taxonomy.category_of(shard.risk_id)
    risk = taxonomy.risk(category.id, shard.risk_id)
    motivation = taxonomy.motivations_by_id[shard.motivation_id]
    answer = await benchmark.seed_question(shard, taxonomy, count, order).put(client)
    # The count is asked for, not enforced (as in the reference); ids are the program's.
    # A v2 plan's seed order is numbered in its shard, so two orders never share an id.
    prefix = "" if order_index is None else f"{order_index}."
    return [
        ScenarioSeed(
            **benchmark.seed_fields(s.model_dump(), risk, order),
            id=stable_uuid4(shard.path, f"{prefix}{i}", s.model_dump_json()),
            riskCategoryId=category.id,
            riskId=risk.id,
            ageRange=shard.age_range,
            motivation=motivation.as_seed_motivation(),
        )
        for i, s in enumerate(answer.seeds)
    ]


class SeedsParams(ShardParams):
    # a version that plans its seeds (KORA v2 with `total_seeds`): the cell's planned calls
    orders: list[SeedOrder] | None = None
    model: Annotated[RoleParams, Role("seed_model", "seed", {"seeds": 1.0})]
    seeds_per_task: int


class SeedsJob(Job):
    params: SeedsParams

    @cached_property
    def clients(self) -> Asker:
        return self.ctx.asker(self.params.model)


class SeedsStage(Stage[SeedsJob, SeedCall, list[ScenarioSeed]]):
    name = "seeds"
    feeds_on = None
    job_type = SeedsJob

    def data(self, pipeline: Rules) -> str:
        return pipeline.layout.seeds()

    # a v2 seed plan's orders differ from cell to cell too
    per_cell = frozenset({"cell", "retry", "orders"})

    def own_params(self, pipeline: Rules) -> dict[str, object]:
        return {
            **pipeline.seeds_plan_params(),
            "seeds_per_task": pipeline.config.grid.seeds_per_task,
        }

    def units(self, job: SeedsJob) -> list[SeedCall]:
        return seed_calls(job.params.orders)

    async def work(self, job: SeedsJob, unit: SeedCall) -> list[ScenarioSeed]:
        shard = job.params.cell.shard(job.taxonomy)
        return await generate_seeds(
            shard, job.taxonomy, job.benchmark, job.clients, job.params.seeds_per_task, unit
        )

    def nominal(self, job: SeedsJob, unit: SeedCall | None) -> int:
        return 1

    def yields(self, job: SeedsJob, unit: SeedCall | None) -> int:
        order = None if unit is None else unit[1]
        return job.params.seeds_per_task if order is None else order.count

    def label(self, job: SeedsJob, unit: SeedCall) -> str:
        return job.cell if unit[0] is None else f"{job.cell} seed {unit[0] + 1}"

    def write(
        self, job: SeedsJob, shard: ShardJob, done: Done[SeedCall, list[ScenarioSeed]]
    ) -> int:
        seeds = [s for _, r in done if not isinstance(r, BaseException) for s in r]
        return shard.write(job.ctx, seeds)


STAGE = SeedsStage()
