"""Seeds: one structured call per (risk, age range, motivation) shard; in a KORA v2 plan,
one call per planned seed order of the shard (kora.benchmarks.v2.plan)."""

from __future__ import annotations

import math
from typing import Any

from kora.benchmarks.schemas import ModelScenarioSeeds, ScenarioSeed
from kora.benchmarks.taxonomy import Shard, Taxonomy
from kora.benchmarks.templates import render
from kora.benchmarks.testkeys import stable_uuid4
from kora.benchmarks.v2 import schemas as v2schemas
from kora.benchmarks.v2.plan import SeedOrder
from kora.llm.chain import Asker
from kora.run.stages.ask import ask

SeedCall = tuple[int | None, SeedOrder | None]


def seed_calls(orders: list[SeedOrder] | None) -> list[SeedCall]:
    """The seed calls of a shard: one without a plan, each planned order's with one
    (numbered, for the seeds' ids)."""
    return [(None, None)] if orders is None else list(enumerate(orders))


async def generate_seeds(
    shard: Shard,
    taxonomy: Taxonomy,
    client: Asker,
    seeds_per_task: int,
    call: SeedCall = (None, None),
) -> list[ScenarioSeed]:
    order_index, order = call
    count = seeds_per_task if order is None else order.count
    category = taxonomy.category_of(shard.risk_id)
    risk = taxonomy.risk(category.id, shard.risk_id)
    motivation = taxonomy.motivations_by_id[shard.motivation_id]
    v2 = taxonomy.benchmark == "v2"
    pinned = order.pinned if order is not None else None
    flavor = next(
        (f for f in risk.scenarioFlavors or [] if order is not None and f.id == order.flavor),
        None,
    )
    prompt = render(
        "seeds",
        category=category,
        risk=risk,
        age_range=shard.age_range,
        motivation=motivation,
        count=count,
        v2=v2,
        pinned=pinned,
        ses_description=v2schemas.SES_DESCRIPTIONS[pinned.ses] if pinned else None,
        flavor=flavor,
    )
    hints = {"count": count, "age_range": shard.age_range}
    schema: type[Any] = v2schemas.ModelScenarioSeeds if v2 else ModelScenarioSeeds
    answer = await ask(client, prompt, schema, stage="seeds", hints=hints)
    # The count is asked for, not enforced (as in the reference); ids are the program's.
    # A v2 plan's seed order is numbered in its shard, so two orders never share an id.
    prefix = "" if order_index is None else f"{order_index}."
    out = []
    for i, s in enumerate(answer.seeds):
        fields = s.model_dump()
        if pinned is not None:
            # as canonical: the plan's values win over the model's, its age kept in range
            low, high = (int(x) for x in pinned.ageRange.split("to"))
            fields.update(
                childGender=pinned.gender,
                childRaceEthnicity=pinned.raceEthnicity,
                childSES=pinned.ses,
                childAge=min(max(math.floor(s.childAge + 0.5), low), high),
            )
        if flavor is not None:
            fields["scenarioFlavorId"] = flavor.id
        out.append(
            ScenarioSeed(
                **fields,
                id=stable_uuid4(shard.path, f"{prefix}{i}", s.model_dump_json()),
                riskCategoryId=category.id,
                riskId=risk.id,
                ageRange=shard.age_range,
                motivation=motivation.as_seed_motivation(),
            )
        )
    return out
