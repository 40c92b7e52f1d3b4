"""The shard stages, in the order their results flow: seeds -> scenarios ->
conversations -> judgments (kora.run.stages.base describes what a stage is)."""

from __future__ import annotations

from kora.run.stages.base import Stage
from kora.run.stages.conversations import ConversationsStage
from kora.run.stages.judgments import JudgmentsStage
from kora.run.stages.scenarios import ScenariosStage
from kora.run.stages.seeds import SeedsStage

STAGES: dict[str, Stage] = {
    s.name: s for s in (SeedsStage(), ScenariosStage(), ConversationsStage(), JudgmentsStage())
}
ORDER = tuple(STAGES)
