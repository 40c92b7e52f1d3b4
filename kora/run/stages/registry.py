"""Each shard stage's description by name: the `STAGE` of the module named after it, for
each name of the one list (kora.run.stages.ORDER)."""

from __future__ import annotations

from importlib import import_module

from kora.run.stages import ORDER
from kora.run.stages.base import AnyStage

STAGES: dict[str, AnyStage] = {
    name: import_module(f"kora.run.stages.{name}").STAGE for name in ORDER
}
