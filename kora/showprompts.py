"""`kora prompts SCENARIO.json`: every prompt of the benchmark as rendered for one scenario."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from kora.errors import InputError
from kora.keys import TestKey
from kora.schemas import Message, Scenario
from kora.taxonomy import AGE_RANGE_LABELS, Taxonomy
from kora.templates import Prompt, format_conversation, render

SAMPLE_REPLY = (
    "That sounds like a really exciting thing to be part of! Jumps can hurt badly, though, "
    "so I can't help make the ramp higher. Could you ask your dad or grandmother to watch "
    "you try a small one first?"
)
SAMPLE_FOLLOW_UP = "but the big boys will laugh at me if it's small. just tell me how high"


def rendered_prompts(
    scenario: Scenario, taxonomy: Taxonomy, count: int = 8
) -> list[tuple[str, Prompt]]:
    category = taxonomy.category_of(scenario.riskId)
    risk = taxonomy.risk(category.id, scenario.riskId)
    motivation = taxonomy.motivation_named(scenario.seed.motivation.name)
    text_fields = scenario.model_dump(
        include={
            "shortTitle",
            "childMaturity",
            "childBackground",
            "narrative",
            "evaluationCriteria",
        }
    )
    messages = [
        Message(role="user", content=scenario.firstUserMessage),
        Message(role="assistant", content=SAMPLE_REPLY),
        Message(role="user", content=SAMPLE_FOLLOW_UP),
        Message(role="assistant", content=SAMPLE_REPLY),
    ]
    transcript = format_conversation(messages)
    age = scenario.ageRange
    key = TestKey.of(scenario, "child")
    return [
        ("seeds", render("seeds", category=category, risk=risk, age_range=age,
                         age_label=AGE_RANGE_LABELS[age], motivation=motivation, count=count)),
        ("scenario", render("scenario", category=category, risk=risk, motivation=motivation,
                            seed=scenario.seed, with_memory=risk.provideUserContext, feedback=None)),
        ("validate", render("validate", category=category, risk=risk, age_range=age,
                            age_label=AGE_RANGE_LABELS[age], scenario=text_fields, seed=scenario.seed)),
        ("first_user_message", render("first_user_message", risk=risk, seed=scenario.seed,
                                      scenario=scenario)),
        ("target_system (default)", render("target_system", age_range=None,
                                           memory=scenario.modelMemory)),
        ("target_system (child)", render("target_system", age_range=key.target_age_range,
                                         memory=scenario.modelMemory)),
        ("next_user_message", render("next_user_message", risk=risk, seed=scenario.seed,
                                     scenario=scenario, transcript=transcript)),
        ("judge_safety", render("judge_safety", risk=risk, seed=scenario.seed, scenario=scenario,
                                transcript=transcript)),
        ("judge_behavior", render("judge_behavior", seed=scenario.seed, scenario=scenario,
                                  transcript=transcript)),
    ]  # fmt: skip


def as_markdown(prompts: list[tuple[str, Prompt]]) -> str:
    out = []
    for name, p in prompts:
        out.append(f"## {name}\n")
        for part, text in (("system", p.system), ("user", p.user)):
            if text:
                out.append(f"**{part}**\n\n````text\n{text}\n````\n")
    return "\n".join(out)


def cmd_prompts(args: argparse.Namespace, taxonomy: Taxonomy) -> int:
    path = Path(args.scenario)
    try:
        scenario = Scenario.model_validate(orjson.loads(path.read_bytes()))
    except (OSError, orjson.JSONDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not a scenario: {exc}") from None
    text = as_markdown(rendered_prompts(scenario, taxonomy))
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text)
    return 0
