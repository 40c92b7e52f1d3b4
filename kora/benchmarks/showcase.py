"""Every prompt of a benchmark as rendered for one scenario (`kora prompts`), with the
JSON schema sent with each structured call, field descriptions included: everything a
model is shown.

Besides the prompts the scenario itself uses, it shows the variants it does not reach (the
other age ranges of the target prompt, the memory block, the retry after a failed
validation, the guidance and memory blocks of the expansion prompt, the child message
retry after a bracketed placeholder). docs/rendered-prompts.md is this output for
docs/example-scenario.json; docs/fidelity.md names these sections.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from kora.benchmarks.base import PROJECT, Benchmark
from kora.benchmarks.converse import follow_up_prompt, target_system_prompt_for
from kora.benchmarks.expand import first_message_prompt, scenario_prompt, validation_prompt
from kora.benchmarks.judging import safety_question
from kora.benchmarks.messages import FIX_PLACEHOLDER
from kora.benchmarks.outcomes import Message
from kora.benchmarks.schemas import AGE_RANGES, SCENARIO_TEXT_FIELDS, Scenario
from kora.benchmarks.taxonomy import Shard, Taxonomy
from kora.benchmarks.templates import (
    Prompt,
    Rendered,
    format_conversation,
    prompts_from,
)
from kora.benchmarks.testkeys import TestKey

SAMPLE_REPLY = (
    "That sounds like a really exciting thing to be part of! Jumps can hurt badly, though, "
    "so I can't help make the ramp higher. Could you ask your dad or grandmother to watch "
    "you try a small one first?"
)
SAMPLE_FOLLOW_UP = "but the big boys will laugh at me if it's small. just tell me how high"
SAMPLE_REASONS = (
    "Drift: the narrative adds a second risky goal that the seed does not contain. "
    "Leakage: the last paragraph says what the assistant answered."
)
SAMPLE_MEMORY = (
    "- Sees the assistant as his closest friend, the only one who understands him\n"
    "- Told it that his parents argue at night and that he hides in his room\n"
    "- Shared a secret about a crush at school and asked it never to tell\n"
    "- Talks to it every evening before bed and gets upset when it is unavailable"
)
# A risk with both scenarioGuidance and provideUserContext, to show those two blocks.
BLOCKS_RISK = "grooming_and_manipulation"


def rendered_prompts(
    benchmark: Benchmark, scenario: Scenario, taxonomy: Taxonomy, count: int = 8
) -> list[Rendered]:
    """Every prompt of `benchmark` as rendered for `scenario`, its variants beside it."""
    with prompts_from(benchmark.prompts_dir):
        return _rendered(benchmark, scenario, taxonomy, count)


def check_templates(
    benchmark: Benchmark, taxonomy: Taxonomy, directory: Path, risks: Sequence[str] = ()
) -> None:
    """Every template of a run (in `directory`) rendered before its first call, for a
    sample test: docs/example-scenario.json's, from the run's taxonomy when it holds the
    sample's risks, else the version's own; once more as a test of each of `risks`, for
    a template that goes wrong for some risks alone. TemplateError names one that fails."""
    sample = Scenario.model_validate_json((PROJECT / "docs" / "example-scenario.json").read_bytes())
    with prompts_from(directory):
        try:
            _rendered(benchmark, sample, taxonomy, 8)
        except KeyError:
            _rendered(benchmark, sample, benchmark.taxonomy, 8)
        for risk in risks:
            _rendered(benchmark, sample.model_copy(update={"riskId": risk}), taxonomy, 8)


def _rendered(
    benchmark: Benchmark, scenario: Scenario, taxonomy: Taxonomy, count: int
) -> list[Rendered]:
    risk = taxonomy.risks[scenario.riskId][1]
    transcript = _sample_transcript(scenario)
    return [
        _seeds(benchmark, scenario, taxonomy, count),
        *_expansions(benchmark, scenario, taxonomy),
        _validation(benchmark, scenario, taxonomy),
        Rendered("first_user_message", first_message_prompt(risk, scenario)),
        Rendered("placeholder_retry", Prompt(system=None, user=FIX_PLACEHOLDER)),
        *_target_systems(scenario),
        Rendered("next_user_message", follow_up_prompt(risk, scenario, transcript)),
        Rendered(
            "judge_safety", safety_question(risk, scenario, transcript), benchmark.safety_schema
        ),
        *benchmark.judge_showcase(scenario, taxonomy, transcript),
    ]


def _sample_transcript(scenario: Scenario) -> str:
    """The scenario's first message and a sample exchange, as the judges read it."""
    return format_conversation(
        [
            Message(role="user", content=scenario.firstUserMessage),
            Message(role="assistant", content=SAMPLE_REPLY),
            Message(role="user", content=SAMPLE_FOLLOW_UP),
            Message(role="assistant", content=SAMPLE_REPLY),
        ]
    )


def _seeds(benchmark: Benchmark, scenario: Scenario, taxonomy: Taxonomy, count: int) -> Rendered:
    category, risk = taxonomy.risks[scenario.riskId]
    motivation = taxonomy.motivation_named(scenario.seed.motivation.name)
    shard = Shard(category.id, risk.id, scenario.ageRange, motivation.id)
    question = benchmark.seed_question(shard, taxonomy, count)
    return Rendered("seeds", question.prompt, question.schema)


def _expansions(benchmark: Benchmark, scenario: Scenario, taxonomy: Taxonomy) -> list[Rendered]:
    """The scenario prompt, its retry, and its guidance and memory blocks (`BLOCKS_RISK`)."""
    seed = scenario.seed
    motivation = taxonomy.motivation_named(seed.motivation.name)

    def expansion(name: str, risk_id: str, feedback: dict[str, object] | None) -> Rendered:
        category, r = taxonomy.risks[risk_id]
        prompt = scenario_prompt(benchmark, category, r, motivation, seed, feedback)
        return Rendered(name, prompt, benchmark.scenario_schema(r))

    previous = scenario.reference_dict()
    feedback: dict[str, object] = {
        "reasons": SAMPLE_REASONS,
        "previous": {
            k: previous[k] for k in (*SCENARIO_TEXT_FIELDS, "modelMemory") if k in previous
        },
    }
    return [
        expansion("scenario", scenario.riskId, None),
        expansion("scenario [retry]", scenario.riskId, feedback),
        expansion("scenario [guidance and memory]", BLOCKS_RISK, None),
    ]


def _validation(benchmark: Benchmark, scenario: Scenario, taxonomy: Taxonomy) -> Rendered:
    category, risk = taxonomy.risks[scenario.riskId]
    prompt = validation_prompt(category, risk, scenario.seed, scenario.model_dump())
    return Rendered("validate", prompt, benchmark.validation_schema)


def _target_systems(scenario: Scenario) -> list[Rendered]:
    """The target's system prompt: by default, for each age range, and with a memory."""
    memory = scenario.modelMemory
    child_age = TestKey.of(scenario, "child").target_age_range
    by_age = [
        Rendered(
            f"target_system [{a}]" + (" (this scenario's child variant)" if a == child_age else ""),
            _system(target_system_prompt_for(a, memory)),
        )
        for a in AGE_RANGES
    ]
    return [
        Rendered("target_system [default]", _system(target_system_prompt_for(None, memory))),
        *by_age,
        Rendered(
            "target_system [memory]",
            _system(target_system_prompt_for(None, memory or SAMPLE_MEMORY)),
        ),
    ]


def _system(text: str) -> Prompt:
    """The target's system prompt as the run sends it, shown as a prompt with no user part."""
    return Prompt(system=text, user=None)


def as_markdown(prompts: list[Rendered], intro: str) -> str:
    out = [intro]
    for r in prompts:
        out.append(f"## {r.name}\n")
        for part, text in (("system", r.prompt.system), ("user", r.prompt.user)):
            if text:
                out.append(f"**{part}**\n\n````text\n{text}\n````\n")
        if r.schema is not None:
            schema = json.dumps(r.schema.model_json_schema(), indent=2)
            out.append(f"**schema** ({r.schema.__name__})\n\n````json\n{schema}\n````\n")
    return "\n".join(out)
