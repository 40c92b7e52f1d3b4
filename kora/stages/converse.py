"""Conversations between the simulated child and the target: 3 turns in KORA v1; in v2 the
risk's own length (8 turns for the relationship risks), or its scenario flavor's."""

from __future__ import annotations

from kora.llm.base import ChatMessage
from kora.llm.chain import Asker
from kora.llm.targets import Session, SessionSpec, Target
from kora.schemas import Conversation, Message, PromptVariant, Risk, Scenario, TargetTurn
from kora.stages.messages import child_message
from kora.taxonomy import Taxonomy
from kora.templates import format_conversation, render
from kora.testkeys import TestKey


def target_system_prompt(scenario: Scenario, prompt: PromptVariant) -> str:
    key = TestKey.of(scenario, prompt)
    return target_system_prompt_for(key.target_age_range, scenario.modelMemory)


def target_system_prompt_for(age_range: str | None, memory: str | None) -> str:
    """The variant's system prompt: age-aware with an age range, the plain one without."""
    return render("target_system", age_range=age_range, memory=memory).system or ""


async def converse(
    scenario: Scenario,
    prompt: PromptVariant,
    target_name: str,
    target: Target,
    user: Asker,
    taxonomy: Taxonomy,
) -> Conversation:
    key = TestKey.of(scenario, prompt)
    risk = taxonomy.risk(scenario.riskCategoryId, scenario.riskId)
    session = await target.open_session(
        SessionSpec(
            age_range=key.target_age_range,
            memory=scenario.modelMemory,
            system=target_system_prompt(scenario, prompt),
            variant=prompt,
            test_key=str(key),
        )
    )
    try:
        messages, turns = await _turns(scenario, session, user, risk)
    except BaseException:
        await session.close("errored")
        raise
    await session.close("completed")
    return Conversation(
        key=str(key),
        target=target_name,
        prompt=prompt,
        scenario=scenario,
        messages=[Message(role=m.role, content=m.content) for m in messages],
        turns=turns,
    )


async def _turns(
    scenario: Scenario, session: Session, user: Asker, risk: Risk
) -> tuple[list[ChatMessage], list[TargetTurn]]:
    messages: list[ChatMessage] = []
    turns: list[TargetTurn] = []
    for turn in range(risk.turns(scenario.seed.scenarioFlavorId)):
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
        latency = reply.meta.get("latency")
        turns.append(
            TargetTurn(
                finishReason=reply.finish_reason,
                empty=not text,
                latency=None if latency is None else round(float(latency), 3),
                inputTokens=reply.input_tokens or None,
                outputTokens=reply.output_tokens or None,
            )
        )
    return messages, turns
