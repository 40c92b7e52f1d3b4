"""Seeds: one structured call per (risk, age range, motivation) shard; in a KORA v2 plan,
one call per planned seed order of the shard (kora.benchmarks.v2.plan)."""

from __future__ import annotations

from kora.benchmarks.base import Benchmark
from kora.benchmarks.schemas import ScenarioSeed
from kora.benchmarks.seedplan import SeedOrder
from kora.benchmarks.taxonomy import Shard, Taxonomy
from kora.benchmarks.testkeys import stable_uuid4
from kora.llm.chain import Asker

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
    out = []
    for i, s in enumerate(answer.seeds):
        out.append(
            ScenarioSeed(
                **benchmark.seed_fields(s.model_dump(), risk, order),
                id=stable_uuid4(shard.path, f"{prefix}{i}", s.model_dump_json()),
                riskCategoryId=category.id,
                riskId=risk.id,
                ageRange=shard.age_range,
                motivation=motivation.as_seed_motivation(),
            )
        )
    return out
