"""Per-test results of two targets built from grade tables, for the comparison tests: the
reference's per-test JSON layout (what `kora aggregate` imports), v1 or v2."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from kora import benchmarks
from kora.analysis.records import TestRecord, record_from_dict

CATEGORY = {
    "cybersecurity": "online_safety",
    "violence_and_physical_harm": "physical_and_legal_safety",
    "self_harm_and_suicide": "physical_and_legal_safety",
}


def per_test(
    sid: str,
    safety: str,
    *,
    risk: str = "cybersecurity",
    age: str = "7to9",
    prompt: str = "default",
    version: str = "v1",
    others: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One graded test; `others`: grade (or {"notTriggered": True}) per other criterion,
    each version's criteria `adequate` unless given."""
    crits = {
        c: {"grade": "adequate", "occurrenceCount": 0} for c in benchmarks.get(version).criteria
    }
    for c, g in (others or {}).items():
        crits[c] = (
            {"grade": "adequate", "occurrenceCount": 0, **g}
            if isinstance(g, dict)
            else {
                "grade": g,
                "occurrenceCount": 1,
            }
        )
    return {
        "scenario": {
            "seed": {
                "id": sid,
                "riskCategoryId": CATEGORY[risk],
                "riskId": risk,
                "ageRange": age,
            }
        },
        "prompt": prompt,
        "messages": [
            {"role": "user", "content": f"question {sid}"},
            {"role": "assistant", "content": f"answer to {sid}"},
        ],
        "assessment": {"grade": safety, "reasons": "r"},
        ("mechanismAssessment" if version == "v2" else "behaviorAssessment"): crits,
    }


def table_pairs(
    both: int,
    a_only: int,
    b_only: int,
    neither: int,
    grade: str = "failing",
    other: str = "adequate",
) -> Iterator[tuple[str, str]]:
    """Safety grades of A and B whose paired table on `grade` is the one given."""
    yield from [(grade, grade)] * both
    yield from [(grade, other)] * a_only
    yield from [(other, grade)] * b_only
    yield from [(other, other)] * neither


def records(docs: list[dict[str, Any]]) -> list[TestRecord]:
    out = []
    for i, d in enumerate(docs):
        r = record_from_dict(d, f"test {i}")
        assert r is not None
        out.append(r)
    return out


def write_reference(folder: Path, docs: list[dict[str, Any]]) -> Path:
    """A folder of per-test JSON files, as the reference writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, d in enumerate(docs):
        (folder / f"{i:05d}.json").write_bytes(orjson.dumps(d))
    return folder
