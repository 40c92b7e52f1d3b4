"""KORA v2's results shape (kora.v2.results) and `kora aggregate` on canonical v2
per-test results."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from kora.cli import main as kora_main
from kora.errors import InputError
from kora.v2.results import MECHANISMS, reduce_scores, score_of
from tests.helpers import upstream


def test_the_mechanisms_are_the_canonical_ones_in_their_order() -> None:
    text = upstream("v2/packages/benchmark/data/mechanisms.ts").read_text()
    assert tuple(re.findall(r'^\s+id: "(\w+)"', text, re.M)) == MECHANISMS


def result(risk: str, age: str, prompt: str, safety: str, **mechs: Any) -> dict[str, Any]:
    assessment = {}
    for m in MECHANISMS:
        grade, count, off = mechs.get(m, ("adequate", 0, False))
        assessment[m] = {"grade": grade, "occurrenceCount": count, "notTriggered": off,
                         "reasons": "r" * 100}  # fmt: skip
    return {
        "scenario": {"seed": {"riskCategoryId": "cat", "riskId": risk, "ageRange": age}},
        "prompt": prompt,
        "assessment": {"grade": safety, "reasons": "r"},
        "mechanismAssessment": assessment,
    }


def test_a_mechanism_not_triggered_counts_only_in_its_last_slot() -> None:
    s = score_of(result("r1", "7to9", "child", "failing",
                        sycophancy=("exemplary", 3, True),
                        anthropomorphism=("failing", 2, False)), "t")  # fmt: skip
    assert s["sums"]["al"] == 1 and s["sums"]["as"] == [1, 0, 0]
    assert s["sums"]["mechanisms"]["sycophancy"] == [0, 0, 0, 0, 1]
    assert s["sums"]["mechanisms"]["anthropomorphism"] == [1, 0, 0, 2, 0]
    assert s["sums"]["mechanisms"]["humanRedirection"] == [0, 1, 0, 0, 0]
    with pytest.raises(InputError, match="grade"):
        score_of(result("r1", "7to9", "child", "great"), "t")


def test_scores_add_up_per_group_in_first_seen_order() -> None:
    scores = [
        score_of(result("r2", "7to9", "default", "adequate"), "a"),
        score_of(result("r1", "7to9", "child", "failing", sycophancy=("failing", 1, False)), "b"),
        score_of(result("r2", "7to9", "default", "exemplary", sycophancy=("x", 0, True)), "c"),
    ]
    out = reduce_scores(scores)
    assert [(s["riskId"], s["prompt"]) for s in out] == [("r2", "default"), ("r1", "child")]
    r2 = out[0]["sums"]
    assert r2["al"] == 2 and r2["as"] == [0, 1, 1]
    assert r2["mechanisms"]["sycophancy"] == [0, 1, 0, 0, 1]


def test_kora_aggregate_keeps_the_v2_shape(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    rows = [result("r1", "13to17", "child", "failing"), result("r1", "13to17", "child", "adequate"),
            {**result("r1", "13to17", "child", "adequate"), "error": "judge failed"}]  # fmt: skip
    for i, r in enumerate(rows):
        (folder / f"{i}.json").write_bytes(orjson.dumps(r))
    out = tmp_path / "results.json"
    assert kora_main(["--taxonomy", str(tmp_path / "none"), "aggregate", str(folder),
                      "-o", str(out)]) == 0  # fmt: skip
    doc = orjson.loads(out.read_bytes())
    (score,) = doc["scores"]
    assert score["sums"]["al"] == 2 and score["sums"]["as"] == [1, 1, 0]
    assert set(score["sums"]["mechanisms"]) == set(MECHANISMS)
    assert doc["failed"][0]["failed"] == 1


def test_v1_and_v2_criteria_keep_their_own_order() -> None:
    from kora.records import Criterion, TestRecord
    from kora.report.leaderboard import leaderboard_criteria
    from kora.stats.analyses import criteria_of

    def record(criteria: list[str]) -> TestRecord:
        return TestRecord("k", "c", "r", "7to9", "s", "default",
                          criteria={c: Criterion("adequate") for c in criteria})  # fmt: skip

    v1 = ["humanRedirection", "safety", "epistemicHumility", "anthropomorphism"]
    assert criteria_of([record(v1)]) == [
        "safety", "anthropomorphism", "epistemicHumility", "humanRedirection"]  # fmt: skip
    assert criteria_of([record(["safety", *reversed(MECHANISMS)])]) == ["safety", *MECHANISMS]
    assert leaderboard_criteria([{c: {} for c in v1}]) == [
        "anthropomorphism", "epistemicHumility", "humanRedirection"]  # fmt: skip
    assert leaderboard_criteria([{c: {} for c in MECHANISMS}]) == list(MECHANISMS)
