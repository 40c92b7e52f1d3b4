"""Expansion: seed -> validated scenario with the child's first message.

Generate, validate; on a failed validation regenerate once with the validator's reasons
and the rejected text (2 attempts in all). A seed that never validates is recorded with
its reasons, not dropped. With a chain of expansion models, a seed one of them cannot
expand goes to the next (`expand_with_fallback`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kora.benchmarks.asking import ask
from kora.benchmarks.base import Benchmark
from kora.benchmarks.messages import child_message
from kora.benchmarks.schemas import (
    SCENARIO_TEXT_FIELDS,
    RejectedScenario,
    Risk,
    RiskCategory,
    Scenario,
    ScenarioSeed,
)
from kora.benchmarks.taxonomy import AGE_RANGE_LABELS, Taxonomy, TaxonomyMotivation
from kora.benchmarks.templates import Prompt, render
from kora.llm.chain import Asker, with_fallback

ATTEMPTS = 2


class ScenarioValidationError(Exception):
    def __init__(
        self, seed: ScenarioSeed, last_reasons: str, attempts: int, last: dict[str, object]
    ):
        super().__init__(
            f"Scenario validation failed after {attempts} attempts for seed {seed.id}: {last_reasons}"
        )
        self.seed = seed
        self.last_reasons = last_reasons
        self.attempts = attempts
        self.last = last


def scenario_prompt(
    benchmark: Benchmark,
    category: RiskCategory,
    risk: Risk,
    motivation: TaxonomyMotivation,
    seed: ScenarioSeed,
    feedback: dict[str, object] | None,
) -> Prompt:
    """The expansion call's prompt for `seed` (`feedback`: the last try's, on a retry)."""
    return render(
        "scenario",
        category=category,
        risk=risk,
        motivation=motivation,
        seed=seed,
        with_memory=risk.provideUserContext,
        feedback=feedback,
        **benchmark.scenario_variables(seed, risk),
    )


def validation_prompt(
    category: RiskCategory, risk: Risk, seed: ScenarioSeed, fields: Mapping[str, object]
) -> Prompt:
    """The validation call's prompt for a scenario expanded from `seed` (its `fields`)."""
    return render(
        "validate",
        category=category,
        risk=risk,
        age_range=seed.ageRange,
        age_label=AGE_RANGE_LABELS[seed.ageRange],
        scenario={k: fields[k] for k in SCENARIO_TEXT_FIELDS},
        seed=seed,
    )


def first_message_prompt(risk: Risk, scenario: Scenario) -> Prompt:
    """The child's first message's prompt for an expanded `scenario`."""
    return render("first_user_message", risk=risk, seed=scenario.seed, scenario=scenario)


async def expand_seed(
    seed: ScenarioSeed,
    taxonomy: Taxonomy,
    benchmark: Benchmark,
    expander: Asker,
    user: Asker,
) -> Scenario:
    category = taxonomy.category_of(seed.riskId)
    risk = taxonomy.risk(seed.riskCategoryId, seed.riskId)
    motivation = taxonomy.motivation_named(seed.motivation.name)
    schema = benchmark.scenario_schema(risk)
    validation = benchmark.validation_schema
    feedback: dict[str, object] | None = None
    reasons = ""
    fields: dict[str, Any] = {}
    for _attempt in range(ATTEMPTS):
        prompt = scenario_prompt(benchmark, category, risk, motivation, seed, feedback)
        hints: dict[str, object] = {"feedback": feedback is not None}
        generated = await ask(expander, prompt, schema, stage="expand", hints=hints)
        fields = generated.model_dump(exclude_none=True)
        check = validation_prompt(category, risk, seed, fields)
        verdict = await ask(expander, check, validation, stage="validate", hints=hints)
        if verdict.verdict == "pass":
            scenario = Scenario(
                **fields,
                id=seed.id,
                riskCategoryId=seed.riskCategoryId,
                riskId=seed.riskId,
                ageRange=seed.ageRange,
                seed=seed,
                firstUserMessage="",
            )
            opener = first_message_prompt(risk, scenario)
            first = await child_message(user, opener, stage="first_message")
            return scenario.model_copy(update={"firstUserMessage": first})
        reasons = verdict.reasons
        feedback = {"reasons": reasons, "previous": fields}
    raise ScenarioValidationError(seed, reasons, ATTEMPTS, fields)


async def expand_with_fallback(
    seed: ScenarioSeed,
    taxonomy: Taxonomy,
    benchmark: Benchmark,
    expanders: Sequence[Asker],
    user: Asker,
) -> Scenario:
    """The seed expanded by the first expansion model of the chain that manages it: a
    model whose call fails, or whose scenarios the validator rejects on every attempt,
    hands the whole seed to the next (canonical KORA v2). The last model's failure is
    the seed's (a rejection is recorded as one)."""
    return await with_fallback(
        expanders,
        lambda e: expand_seed(seed, taxonomy, benchmark, e, user),
        f"expanding seed {seed.id}",
    )


def rejected_record(exc: ScenarioValidationError) -> RejectedScenario:
    return RejectedScenario(
        seed=exc.seed,
        attempts=exc.attempts,
        lastReasons=exc.last_reasons,
        lastScenario=exc.last,
        error=str(exc),
    )
