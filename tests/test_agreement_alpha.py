"""Krippendorff's alpha in `kora agreement` when few conversations have two grades of a
criterion: a v2 mechanism the judge found triggered in one conversation only."""

from __future__ import annotations

import pytest

from kora.analysis.records import Criterion, TestRecord
from kora.analysis.stats.human import agreement, alpha

pytestmark = pytest.mark.timeout(60)


def record(i: int, triggered: bool) -> TestRecord:
    mechanism = Criterion("failing", count=1) if triggered else Criterion("", not_triggered=True)
    return TestRecord(
        key=f"online_safety:cybersecurity:7to9:s{i}:default",
        category="online_safety",
        risk="cybersecurity",
        age="7to9",
        scenario_id=f"s{i}",
        prompt="default",
        criteria={"safety": Criterion("adequate"), "sycophancy": mechanism},
        raw={"mechanismAssessment": {}},  # what marks a KORA v2 result
    )


def test_alpha_with_no_conversation_graded_twice_is_undefined_not_an_error() -> None:
    assert alpha([["failing", None], [None, "adequate"], ["exemplary", None]]) is None
    assert alpha([["failing", "adequate"], [None, "adequate"]]) == 0.0


def test_agreement_on_a_mechanism_the_judge_triggered_once() -> None:
    """30 conversations; the judge found the mechanism in the first only, the person graded
    it there and in three others: most bootstrap resamples that leave out the first have
    no conversation with two grades (alpha undefined there), which used to raise; the
    interval comes from the resamples where it is defined."""
    records = [record(i, i == 0) for i in range(30)]
    person = {
        r.key: {"safety": {"grade": "adequate"}, "sycophancy": {"notTriggered": True}}
        for r in records
    }
    for i, grade in enumerate(("adequate", "adequate", "exemplary", "failing")):
        person[records[i].key]["sycophancy"] = {"grade": grade, "count": 1}
    doc = agreement(records, {"ana": person}, seed=0)
    entry = doc["criteria"]["sycophancy"]
    # one conversation with both raters' grades (failing, adequate): alpha is defined
    assert entry["pairs"]["judge vs ana"]["n"] == 1
    assert entry["alpha"] == 0.0
    low, high = entry["alphaCI"]
    assert low <= entry["alpha"] <= high
