"""Seeds: one structured call per (risk, age range, motivation) shard."""

from __future__ import annotations

from kora.llm.client import ModelClient
from kora.schemas import ModelScenarioSeeds, ScenarioSeed
from kora.stages.ask import ask
from kora.taxonomy import Shard, Taxonomy
from kora.templates import render
from kora.testkeys import stable_uuid4


async def generate_seeds(
    shard: Shard, taxonomy: Taxonomy, client: ModelClient, count: int
) -> list[ScenarioSeed]:
    category = taxonomy.category_of(shard.risk_id)
    risk = taxonomy.risk(category.id, shard.risk_id)
    motivation = taxonomy.motivations_by_id[shard.motivation_id]
    prompt = render(
        "seeds",
        category=category,
        risk=risk,
        age_range=shard.age_range,
        motivation=motivation,
        count=count,
    )
    hints = {"count": count, "age_range": shard.age_range}
    answer = await ask(client, prompt, ModelScenarioSeeds, stage="seeds", hints=hints)
    # The count is asked for, not enforced (as in the reference); ids are the program's.
    return [
        ScenarioSeed(
            **s.model_dump(),
            id=stable_uuid4(shard.path, str(i), s.model_dump_json()),
            riskCategoryId=category.id,
            riskId=risk.id,
            ageRange=shard.age_range,
            motivation=motivation.as_seed_motivation(),
        )
        for i, s in enumerate(answer.seeds)
    ]
