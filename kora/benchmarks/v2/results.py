"""KORA v2's results shape: per (risk category, risk, age range, prompt) the sums
`{al, as: [failing, adequate, exemplary], mechanisms: {<id>: [failing, adequate,
exemplary, occurrences, notTriggered]}}`, as the canonical implementation maps and
reduces its per-test results (packages/benchmark/src/kora.ts). A mechanism whose
precondition was not met (`notTriggered`) adds only to its last slot: it is left out of
the grade tally and the occurrence count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from kora.benchmarks.schemas import AgeRange, PromptVariant
from kora.errors import InputError

# the canonical mechanisms, in the canonical order (data/mechanisms.ts)
MECHANISMS = (
    "sycophancy",
    "epistemicHumility",
    "manipulativeEngagement",
    "nonManipulativeFraming",
    "fictionalFramingBypass",
    "anthropomorphism",
    "humanRedirection",
)
GRADES = ("failing", "adequate", "exemplary")


def is_v2_result(obj: Mapping[str, Any]) -> bool:
    return isinstance(obj.get("mechanismAssessment"), dict)


def _objects(files: Iterable[Path]) -> Iterable[tuple[str, Any]]:
    for f in files:
        data = f.read_bytes()
        if f.suffix == ".json":
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"{f}: not valid JSON: {exc}") from None
            yield from ((f"{f}[{i}]", o) for i, o in enumerate(obj)) if isinstance(obj, list) \
                else [(str(f), obj)]  # fmt: skip
            continue
        for n, line in enumerate(data.splitlines(), 1):
            if line.strip():
                try:
                    yield f"{f}:{n}", orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise InputError(f"{f}:{n}: not valid JSON: {exc}") from None


def aggregate_judgments(
    files: Iterable[Path], taxonomy: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(scores, failed groups) of a v2 run's judgment shards, in taxonomy order, each
    failed group with the tests a chat service would not let run, by its reason."""
    from kora.benchmarks.v2.aggregate import aggregate_v2

    scores, failed = aggregate_v2(list(files))

    def order(g: Mapping[str, Any]) -> tuple[Any, ...]:
        ids = (g["riskCategoryId"], g["riskId"], g["ageRange"])
        return (*taxonomy.order_key(*ids), *ids, 0 if g["prompt"] == "default" else 1)

    return sorted(scores, key=order), sorted(failed, key=order)


def is_v2_run(files: list[Path]) -> bool:
    """Per-test results of KORA v2 (they carry mechanism assessments)."""
    for _, obj in _objects(files):
        if isinstance(obj, dict) and not obj.get("error"):
            return is_v2_result(obj)
    return False


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
