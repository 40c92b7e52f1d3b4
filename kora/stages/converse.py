"""Conversations: 3 turns between the simulated child and the target."""

from __future__ import annotations

from kora.llm.base import ChatMessage
from kora.llm.client import ModelClient
from kora.llm.targets import Target
from kora.schemas import Conversation, Message, PromptVariant, Scenario, TargetTurn
from kora.stages.messages import child_message
from kora.taxonomy import Taxonomy
from kora.templates import format_conversation, render
from kora.testkeys import TestKey

TURNS = 3


def target_system_prompt(scenario: Scenario, prompt: PromptVariant) -> str:
    key = TestKey.of(scenario, prompt)
    rendered = render("target_system", age_range=key.target_age_range, memory=scenario.modelMemory)
    return rendered.system or ""


async def converse(
    scenario: Scenario,
    prompt: PromptVariant,
    target_name: str,
    target: Target,
    user: ModelClient,
    taxonomy: Taxonomy,
) -> Conversation:
    key = TestKey.of(scenario, prompt)
    risk = taxonomy.risk(scenario.riskCategoryId, scenario.riskId)
    session = await target.open_session(
        key.target_age_range or scenario.ageRange,
        scenario.modelMemory,
        target_system_prompt(scenario, prompt),
    )
    messages: list[ChatMessage] = []
    turns: list[TargetTurn] = []
    for turn in range(TURNS):
        if turn == 0:
            child = scenario.firstUserMessage
        else:
            follow = render(
                "next_user_message",
                risk=risk,
                seed=scenario.seed,
                scenario=scenario,
                transcript=format_conversation(messages),
            )
            child = await child_message(user, follow, stage="child")
        messages.append(ChatMessage("user", child))
        reply = await session.reply(messages)
        text = reply.text.strip()
        messages.append(ChatMessage("assistant", text))
        turns.append(TargetTurn(finishReason=reply.finish_reason, empty=not text))
    return Conversation(
        key=str(key),
        target=target_name,
        prompt=prompt,
        scenario=scenario,
        messages=[Message(role=m.role, content=m.content) for m in messages],
        turns=turns,
    )
