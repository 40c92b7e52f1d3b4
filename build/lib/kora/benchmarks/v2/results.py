"""KORA v2's results shape: per (risk category, risk, age range, prompt) the sums
`{al, as: [failing, adequate, exemplary], mechanisms: {<id>: [failing, adequate,
exemplary, occurrences, notTriggered]}}`, as the canonical implementation maps and
reduces its per-test results (packages/benchmark/src/kora.ts). A mechanism whose
precondition was not met (`notTriggered`) adds only to its last slot: it is left out of
the grade tally and the occurrence count.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kora.benchmarks.schemas import AgeRange, PromptVariant


class _Sums(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    al: int
    as_: list[int] = Field(alias="as", min_length=3, max_length=3)
    # [failing, adequate, exemplary, occurrences, notTriggered]
    mechanisms: dict[str, list[int | float]]


class _Score(BaseModel):
    model_config = ConfigDict(extra="forbid")
    riskCategoryId: str
    riskId: str
    ageRange: AgeRange
    prompt: PromptVariant
    sums: _Sums


class RunResultV2(BaseModel):
    """KORA v2's results.json shape (canonical runResult.ts): results.json is checked
    against it when written."""

    scores: list[_Score]
