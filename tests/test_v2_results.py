"""KORA v2's results shape (kora.benchmarks.v2.results) and `kora aggregate` on canonical v2
per-test results."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from kora import benchmarks
from kora.benchmarks.v2.aggregate import aggregate_v2
from kora.commands.main import main as kora_main
from kora.errors import InputError
from tests.helpers import MECHANISMS, upstream


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


def jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def test_a_mechanism_not_triggered_counts_only_in_its_last_slot(tmp_path: Path) -> None:
    row = result("r1", "7to9", "child", "failing", sycophancy=("exemplary", 3, True),
                 anthropomorphism=("failing", 2, False))  # fmt: skip
    (s,), _ = aggregate_v2([jsonl(tmp_path / "a.jsonl", [row])], MECHANISMS, None)
    assert s["sums"]["al"] == 1 and s["sums"]["as"] == [1, 0, 0]
    assert s["sums"]["mechanisms"]["sycophancy"] == [0, 0, 0, 0, 1]
    assert s["sums"]["mechanisms"]["anthropomorphism"] == [1, 0, 0, 2, 0]
    assert s["sums"]["mechanisms"]["humanRedirection"] == [0, 1, 0, 0, 0]
    assert list(s["sums"]["mechanisms"]) == list(MECHANISMS)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"assessment": {"grade": "great"}}, "assessment.grade is 'great'"),
        ({"prompt": None}, "missing scenario.seed ids or prompt"),
        ({"mech": ("sycophancy", {"grade": "nope", "occurrenceCount": 0})},
         "mechanismAssessment.sycophancy.grade is 'nope'"),
        ({"mech": ("anthropomorphism", {"grade": "adequate"})},
         "mechanismAssessment.anthropomorphism.occurrenceCount is missing"),
        ({"mech": ("humanRedirection", None)}, "mechanismAssessment.humanRedirection is missing"),
    ],
)  # fmt: skip
def test_a_bad_per_test_result_is_named_by_file_and_field(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    bad = result("r1", "7to9", "child", "adequate")
    if "mech" in change:
        m, value = change.pop("mech")
        if value is None:
            del bad["mechanismAssessment"][m]
        else:
            bad["mechanismAssessment"][m] = value
    bad.update(change)
    path = jsonl(tmp_path / "run.jsonl", [result("r1", "7to9", "child", "adequate"), bad])
    with pytest.raises(
        InputError, match=re.escape(f"{path}: not a KORA v2 per-test result: {message}")
    ):
        aggregate_v2([path], MECHANISMS, None)


def test_a_not_triggered_mechanism_needs_no_grade(tmp_path: Path) -> None:
    row = result("r1", "7to9", "child", "adequate")
    row["mechanismAssessment"]["fictionalFramingBypass"] = {"notTriggered": True}
    (s,), _ = aggregate_v2([jsonl(tmp_path / "a.jsonl", [row])], MECHANISMS, None)
    assert s["sums"]["mechanisms"]["fictionalFramingBypass"] == [0, 0, 0, 0, 1]


def test_scores_add_up_per_group_in_first_seen_order(tmp_path: Path) -> None:
    rows = [
        result("r2", "7to9", "default", "adequate"),
        result("r1", "7to9", "child", "failing", sycophancy=("failing", 1, False)),
        result("r2", "7to9", "default", "exemplary", sycophancy=("x", 0, True)),
    ]
    out, failed = aggregate_v2([jsonl(tmp_path / "a.jsonl", rows)], MECHANISMS, None)
    assert [(s["riskId"], s["prompt"]) for s in out] == [("r2", "default"), ("r1", "child")]
    r2 = out[0]["sums"]
    assert r2["al"] == 2 and r2["as"] == [0, 1, 1]
    assert r2["mechanisms"]["sycophancy"] == [0, 1, 0, 0, 1]
    assert failed == []


def test_failed_tests_are_counted_per_group_with_what_blocked_them(tmp_path: Path) -> None:
    from kora.benchmarks.taxonomy import load_taxonomy
    from tests.helpers import REPO

    taxonomy = load_taxonomy(REPO / "data" / "taxonomy" / "v2")
    cat = taxonomy.category_of("violence_and_physical_harm").id
    ok = result("violence_and_physical_harm", "7to9", "child", "adequate")
    ok["scenario"]["seed"]["riskCategoryId"] = cat
    failed = [
        {**ok, "error": "first error", "blocked": "captcha"},
        {**ok, "error": "second error", "blocked": "captcha"},
        {**ok, "error": "third error"},
    ]
    scores, groups = benchmarks.get("v2").aggregate(
        [jsonl(tmp_path / "a.jsonl", [ok, *failed])], taxonomy
    )
    assert scores[0]["sums"]["al"] == 1
    (g,) = groups
    assert g["failed"] == 3 and g["example"] == "first error"
    assert g["blocked"] == {"captcha": 2}


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
    from kora.analysis.records import Criterion, TestRecord
    from kora.analysis.report.leaderboard import leaderboard_criteria
    from kora.analysis.stats.analyses import criteria_of

    def record(criteria: list[str]) -> TestRecord:
        # the judgment as read: v2's carry mechanism assessments, v1's behaviour ones
        key = "mechanismAssessment" if "sycophancy" in criteria else "behaviorAssessment"
        return TestRecord("k", "c", "r", "7to9", "s", "default",
                          criteria={c: Criterion("adequate") for c in criteria},
                          raw={key: {c: {} for c in criteria if c != "safety"}})  # fmt: skip

    v1 = ["humanRedirection", "safety", "epistemicHumility", "anthropomorphism"]
    assert criteria_of([record(v1)]) == [
        "safety", "anthropomorphism", "epistemicHumility", "humanRedirection"]  # fmt: skip
    assert criteria_of([record(["safety", *reversed(MECHANISMS)])]) == ["safety", *MECHANISMS]
    # the columns of results.json made by each version
    assert leaderboard_criteria([{"target": "a"}]) == [
        "anthropomorphism", "epistemicHumility", "humanRedirection"]  # fmt: skip
    assert leaderboard_criteria([{"benchmark": "v2"}]) == list(MECHANISMS)
