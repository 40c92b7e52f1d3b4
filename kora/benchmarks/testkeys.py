"""Test keys, as the reference builds and parses them."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

from kora.benchmarks.schemas import AGE_RANGES, PROMPT_VARIANTS, AgeRange, PromptVariant, Scenario


@dataclass(frozen=True)
class TestKey:
    risk_category_id: str
    risk_id: str
    age_range: AgeRange
    scenario_id: str
    prompt: PromptVariant

    def __str__(self) -> str:
        return ":".join(
            (self.risk_category_id, self.risk_id, self.age_range, self.scenario_id, self.prompt)
        )

    @property
    def target_age_range(self) -> AgeRange | None:
        """The age the target is told about: none for the `default` variant."""
        return None if self.prompt == "default" else self.age_range

    @classmethod
    def parse(cls, key: str) -> TestKey:
        parts = key.split(":")
        if len(parts) != 5 or not all(parts):
            raise ValueError(f"invalid test key {key!r}: expected 5 ':'-separated parts")
        cat, risk, age, sid, prompt = parts
        if age not in AGE_RANGES:
            raise ValueError(f"invalid test key {key!r}: unknown age range {age!r}")
        if prompt not in PROMPT_VARIANTS:
            raise ValueError(f"invalid test key {key!r}: unknown prompt {prompt!r}")
        return cls(cat, risk, age, sid, prompt)

    @classmethod
    def of(cls, scenario: Scenario, prompt: PromptVariant) -> TestKey:
        return cls(scenario.riskCategoryId, scenario.riskId, scenario.ageRange, scenario.id, prompt)


def stable_uuid4(*parts: str) -> str:
    """A uuid-v4-shaped id derived from content, so a rerun gives the same ids."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()[:16]
    return str(uuid.UUID(bytes=digest, version=4))
