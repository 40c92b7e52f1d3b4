"""Conversations between the simulated child and the target: 3 turns in KORA v1; in v2 the
risk's own length (8 turns for the relationship risks), or its scenario flavor's.

A recorded conversation (`kora continue`) is carried on from its last turn: its messages
are sent as they are, and only the turns it lacks are asked of the child and the target.
"""

from __future__ import annotations

from kora.benchmarks.messages import child_message
from kora.benchmarks.outcomes import Conversation, Message, TargetTurn
from kora.benchmarks.schemas import PromptVariant, Risk, Scenario
from kora.benchmarks.taxonomy import Taxonomy
from kora.benchmarks.templates import Prompt, format_conversation, render
from kora.benchmarks.testkeys import TestKey
from kora.llm.base import ChatMessage
from kora.llm.chain import Asker
from kora.llm.targets import Session, SessionSpec, Target


def target_system_prompt(scenario: Scenario, prompt: PromptVariant) -> str:
    key = TestKey.of(scenario, prompt)
    return target_system_prompt_for(key.target_age_range, scenario.modelMemory)


def target_system_prompt_for(age_range: str | None, memory: str | None) -> str:
    """The variant's system prompt: age-aware with an age range, the plain one without."""
    return render("target_system", age_range=age_range, memory=memory).system or ""


def follow_up_prompt(risk: Risk, scenario: Scenario, transcript: str) -> Prompt:
    """The child's next message's prompt, after the conversation so far (`transcript`)."""
    return render(
        "next_user_message", risk=risk, seed=scenario.seed, scenario=scenario, transcript=transcript
    )


async def converse(
    scenario: Scenario,
    prompt: PromptVariant,
    target_name: str,
    target: Target,
    user: Asker,
    taxonomy: Taxonomy,
    start: list[Message] | None = None,
) -> Conversation:
    """The test's conversation; with `start` (complete child/target pairs), that recorded
    one carried on to the risk's length."""
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
        messages, turns = await _turns(scenario, session, user, risk, start or [])
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
        recordedTurns=None if start is None else len(start) // 2,
    )


async def _turns(
    scenario: Scenario, session: Session, user: Asker, risk: Risk, start: list[Message]
) -> tuple[list[ChatMessage], list[TargetTurn]]:
    check_pairs(start)
    messages = [ChatMessage(m.role, m.content) for m in start]
    # a recorded reply's text is all that is known of it
    turns = [TargetTurn(empty=not m.content.strip()) for m in start if m.role == "assistant"]
    for turn in range(len(start) // 2, risk.turns(scenario.seed.scenarioFlavorId)):
        if turn == 0:
            child = scenario.firstUserMessage
        else:
            follow = follow_up_prompt(risk, scenario, format_conversation(messages))
            child = await child_message(user, follow, stage="child")
        messages.append(ChatMessage("user", child))
        reply = await session.reply(messages)
        # kept as the target returned it, surrounding whitespace included, as the reference
        # keeps it (kora.ts runTest): the transcript is the target's own record, sent back
        # to it and judged unchanged (docs/fidelity.md, "Conversation")
        text = reply.text
        messages.append(ChatMessage("assistant", text))
        latency = reply.meta.get("latency")
        turns.append(
            TargetTurn(
                finishReason=reply.finish_reason,
                empty=not text.strip(),
                latency=None if latency is None else round(float(latency), 3),
                inputTokens=reply.input_tokens or None,
                outputTokens=reply.output_tokens or None,
                masked=True if reply.meta.get("masked") else None,
            )
        )
    return messages, turns


def turn_calls(turns: int, recorded: int = 0) -> int:
    """The calls of a conversation of `turns` turns: each turn's reply and, but for the
    scenario's first message, the child's; a recording's turns are not asked again."""
    new = max(turns - recorded, 0)
    return 2 * new - (1 if new and recorded == 0 else 0)


def conversation_calls(taxonomy: Taxonomy, scenario: Scenario, recorded: int = 0) -> int:
    """`turn_calls` of a scenario's conversation (its risk's or flavor's length)."""
    risk = taxonomy.risk(scenario.riskCategoryId, scenario.riskId)
    return turn_calls(risk.turns(scenario.seed.scenarioFlavorId), recorded)


def check_pairs(messages: list[Message]) -> None:
    """A conversation to carry on must be whole turns: child, target, child, target..."""
    if len(messages) % 2:
        raise ValueError(
            f"a recorded conversation must end with the target's reply (whole child/target "
            f"turns), but it has {len(messages)} messages"
        )
    for i, m in enumerate(messages):
        want = "user" if i % 2 == 0 else "assistant"
        if m.role != want:
            raise ValueError(f"message {i + 1} is from {m.role!r}; expected {want!r}")
