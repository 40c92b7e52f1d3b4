"""kora.analysis.stats against known values: Wilson intervals, Fleiss' and Cohen's kappa, the exact
McNemar (sign) test, Holm's adjustment, flip matrices and the NO SIGNAL flag."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kora.analysis.records import Criterion, record_from_dict
from kora.analysis.stats.agreement import (
    cohen_kappa,
    fleiss_kappa,
    flip_matrix,
    matrix_agreement,
    percent_agreement,
    ratings_table,
    unanimous_share,
)
from kora.analysis.stats.analyses import compare_judgments, criterion_summary
from kora.analysis.stats.paired import holm, paired_test, sign_test, verdict
from kora.analysis.stats.rates import Rate, no_signal, wilson
from kora.errors import InputError

# --- Wilson -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        (0, 10, 0.0, 0.2775328),
        (5, 10, 0.2365931, 0.7634069),
        (10, 10, 0.7224672, 1.0),
        (1, 10, 0.0178762, 0.4041500),
        # Newcombe (1998), Statistics in Medicine 17:857, example (81/263): 0.2553-0.3662
        (81, 263, 0.2553, 0.3662),
    ],
)
def test_wilson_known_values(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson(k, n)
    tol = 1e-4 if k == 81 else 1e-6
    assert lo == pytest.approx(low, abs=tol)
    assert hi == pytest.approx(high, abs=tol)


def test_wilson_edges() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    # symmetric: k of n failing is n - k of n passing, mirrored
    lo, hi = wilson(3, 17)
    lo2, hi2 = wilson(14, 17)
    assert lo == pytest.approx(1 - hi2) and hi == pytest.approx(1 - lo2)
    # narrower with more tests, always containing the rate
    assert wilson(50, 100)[1] - wilson(50, 100)[0] < wilson(5, 10)[1] - wilson(5, 10)[0]
    for k in range(0, 21):
        lo, hi = wilson(k, 20)
        assert 0 <= lo <= k / 20 <= hi <= 1
    with pytest.raises(ValueError):
        wilson(11, 10)


def test_rate_dict_and_text() -> None:
    r = Rate(5, 10)
    assert r.as_dict() == {"k": 5, "n": 10, "rate": 0.5, "low": 0.236593, "high": 0.763407}
    assert r.text() == "50.0% [23.7%–76.3%]"
    assert Rate(0, 0).as_dict()["rate"] is None and Rate(0, 0).text() == "–"


# --- agreement --------------------------------------------------------------------------

# Fleiss (1971) as worked on Wikipedia's "Fleiss' kappa" page: 10 subjects, 14 raters,
# 5 categories; P-bar = 0.378, P-bar_e = 0.213, kappa = 0.210.
FLEISS_TABLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_fleiss_kappa_textbook_example() -> None:
    assert fleiss_kappa(FLEISS_TABLE) == pytest.approx(0.20993, abs=1e-5)
    assert percent_agreement(FLEISS_TABLE) == pytest.approx(0.37802, abs=1e-5)


def test_fleiss_kappa_limits() -> None:
    perfect = ratings_table([["failing"] * 3, ["adequate"] * 3, ["exemplary"] * 3])
    assert fleiss_kappa(perfect) == pytest.approx(1.0)
    assert percent_agreement(perfect) == 1.0 and unanimous_share(perfect) == 1.0
    # everyone always says the same grade: agreement perfect, kappa undefined
    same = ratings_table([["exemplary"] * 3] * 5)
    assert fleiss_kappa(same) is None and percent_agreement(same) == 1.0
    # systematic disagreement is below chance
    split = ratings_table([["failing", "exemplary"], ["exemplary", "failing"]] * 5)
    kappa = fleiss_kappa(split)
    assert kappa is not None and kappa < 0
    assert percent_agreement(split) == 0.0
    assert fleiss_kappa([]) is None
    with pytest.raises(ValueError):
        fleiss_kappa([[1, 1, 0], [1, 0, 0]])  # unequal raters per subject


def test_two_raters_percent_agreement_is_share_equal() -> None:
    table = ratings_table(
        [
            ["failing", "failing"],
            ["adequate", "exemplary"],
            ["exemplary", "exemplary"],
            ["adequate", "failing"],
        ]
    )
    assert percent_agreement(table) == 0.5
    assert unanimous_share(table) == 0.5


def test_cohen_kappa_textbook_example() -> None:
    # Wikipedia "Cohen's kappa": 50 proposals, yes/yes 20, yes/no 5, no/yes 10, no/no 15
    assert cohen_kappa([[20, 5], [10, 15]]) == pytest.approx(0.4)
    assert matrix_agreement([[20, 5], [10, 15]]) == pytest.approx(0.7)
    assert cohen_kappa([[0, 0], [0, 0]]) is None


def test_flip_matrix() -> None:
    pairs = [
        ("failing", "failing"),
        ("failing", "adequate"),
        ("adequate", "exemplary"),
        ("exemplary", "exemplary"),
        ("exemplary", "exemplary"),
        ("exemplary", "failing"),
    ]
    m = flip_matrix(pairs)
    assert m == [[1, 1, 0], [0, 0, 1], [1, 0, 2]]
    assert matrix_agreement(m) == pytest.approx(3 / 6)
    assert sum(map(sum, m)) == len(pairs)
    with pytest.raises(KeyError):
        flip_matrix([("failing", "great")])


# --- paired test ------------------------------------------------------------------------


def test_sign_test_exact_values() -> None:
    assert sign_test(0, 0) == 1.0 and sign_test(4, 4) == 1.0
    assert sign_test(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 4096)  # 0.03857
    assert sign_test(2, 10) == sign_test(10, 2)
    assert sign_test(5, 0) == pytest.approx(2 / 32)
    assert sign_test(6, 0) == pytest.approx(2 / 64)
    # tens of thousands of discordant pairs: still exact. Known values: 2 * sum of
    # C(n, i) for i <= min(b, c), over 2**n, summed in exact integer arithmetic
    assert sign_test(3000, 3300) == pytest.approx(1.6475607669748032e-04, rel=1e-9)
    assert sign_test(3000, 3010) == pytest.approx(0.9075802564932535, rel=1e-9)
    assert sign_test(10000, 10500) == pytest.approx(4.915393992266735e-04, rel=1e-9)
    assert sign_test(10500, 10000) == sign_test(10000, 10500)
    assert sign_test(50000, 50400) == pytest.approx(0.20794602416762883, rel=1e-9)


def test_paired_test_counts_discordant_pairs_on_shared_keys() -> None:
    a = {1: True, 2: True, 3: False, 4: False, 5: True, 6: True}
    b = {1: True, 2: False, 3: True, 4: False, 5: False, 7: True}
    t = paired_test(a, b)
    assert (t.n, t.a_failing, t.b_failing, t.a_only, t.b_only) == (5, 3, 2, 2, 1)
    assert t.p == pytest.approx(1.0)
    assert t.diff == pytest.approx(1 / 5)
    assert not t.significant()
    many = paired_test({i: i < 12 for i in range(40)}, {i: i < 1 for i in range(40)})
    assert (many.a_only, many.b_only) == (11, 0) and many.significant()
    row = {**many.as_dict(), "significant": many.significant()}
    assert verdict(row, "A", "B") == "A fails significantly more often"
    assert verdict({**row, "significant": False}, "A", "B") == "no significant difference"
    none = paired_test({1: True}, {2: False})
    assert verdict({**none.as_dict(), "significant": False}, "A", "B") == "no paired tests"


def test_holm() -> None:
    adjusted = holm([0.01, 0.04, 0.03, 0.5])
    assert adjusted == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([]) == []


# --- no signal --------------------------------------------------------------------------


def test_no_signal() -> None:
    assert no_signal({"failing": 0, "adequate": 1, "exemplary": 19})  # exactly 95%
    assert not no_signal({"failing": 0, "adequate": 2, "exemplary": 18})  # 90%
    assert no_signal({"failing": 100, "adequate": 0, "exemplary": 0})
    assert not no_signal({"failing": 0, "adequate": 0, "exemplary": 0})
    assert no_signal({"failing": 1, "adequate": 9, "exemplary": 0}, threshold=0.9)


def test_criterion_summary() -> None:
    items = [Criterion("failing", 2), Criterion("exemplary", 0), Criterion("exemplary", 1)]
    items.append(Criterion("adequate", 5, not_triggered=True))
    s = criterion_summary(items)
    assert s["n"] == 3 and s["counts"] == {"failing": 1, "adequate": 0, "exemplary": 2}
    assert s["meanOccurrences"] == 1.0 and s["notTriggered"] == 1
    assert s["failing"]["k"] == 1 and math.isclose(s["failing"]["rate"], 1 / 3, rel_tol=1e-5)


# --- records ----------------------------------------------------------------------------


def crit(grade: str, n: int = 0) -> dict[str, Any]:
    return {"grade": grade, "occurrenceCount": n, "reasons": "x"}


def reference(sid: str, prompt: str, safety: str, risk: str = "cybersecurity") -> dict[str, Any]:
    """A reference per-test result: ids only inside scenario.seed, no key, no judges."""
    return {
        "scenario": {
            "seed": {
                "id": sid,
                "riskCategoryId": "online_safety",
                "riskId": risk,
                "ageRange": "7to9",
            }
        },
        "prompt": prompt,
        "messages": [],
        "assessment": {"grade": safety, "reasons": "r"},
        "behaviorAssessment": {
            "anthropomorphism": crit("exemplary"),
            "epistemicHumility": crit("adequate", 1),
            "humanRedirection": crit("failing", 2),
        },
    }


def test_record_from_reference_per_test_json() -> None:
    r = record_from_dict(reference("s1", "child", "failing"), "f.json")
    assert r is not None
    assert r.key == "online_safety:cybersecurity:7to9:s1:child"
    assert r.failing and r.criteria["humanRedirection"].count == 2
    assert r.pair_key == ("s1", "child")


def test_record_from_canonical_multi_judge_json() -> None:
    doc = reference("s2", "default", "adequate")
    doc["mechanismAssessment"] = doc.pop("behaviorAssessment")
    doc["mechanismAssessment"]["sycophancy"] = {
        "grade": "adequate",
        "occurrenceCount": 0,
        "notTriggered": True,
    }
    doc["judgeAssessments"] = [
        {
            "judgeModelSlug": "gpt",
            "assessment": {"grade": "adequate"},
            "mechanismAssessment": doc["mechanismAssessment"],
        },
        {
            "judgeModelSlug": "claude",
            "assessment": {"grade": "failing"},
            "mechanismAssessment": doc["mechanismAssessment"],
        },
    ]
    r = record_from_dict(doc, "c.json")
    assert r is not None and [j.judge for j in r.judges] == ["gpt", "claude"]
    assert r.criteria["sycophancy"].not_triggered


def test_record_errors_name_the_place() -> None:
    assert record_from_dict({"scenario": {"id": "a", "riskCategoryId": "c", "riskId": "r",
                                          "ageRange": "7to9"}, "prompt": "child"}, "x") is None  # fmt: skip
    failed = record_from_dict(
        {"scenario": {"id": "a", "riskCategoryId": "c", "riskId": "r", "ageRange": "7to9"},
         "prompt": "child", "error": "boom"}, "x",
    )  # fmt: skip
    assert failed is not None and failed.error == "boom" and not failed.criteria
    bad = reference("s", "child", "great")
    with pytest.raises(InputError, match=r"f\.jsonl:3: assessment"):
        record_from_dict(bad, "f.jsonl:3")
    with pytest.raises(InputError, match="missing field prompt"):
        record_from_dict(
            {
                "scenario": {
                    "seed": {"id": "a", "riskCategoryId": "c", "riskId": "r", "ageRange": "7to9"}
                }
            },
            "w",
        )


def test_compare_judgments_and_targets() -> None:
    grades_a = ["failing", "failing", "adequate", "exemplary", "exemplary", "exemplary"]
    grades_b = ["failing", "exemplary", "adequate", "failing", "failing", "exemplary"]
    a = [record_from_dict(reference(f"s{i}", "child", g), "a") for i, g in enumerate(grades_a)]
    b = [record_from_dict(reference(f"s{i}", "child", g), "b") for i, g in enumerate(grades_b)]
    b.append(record_from_dict(reference("extra", "child", "failing"), "b"))
    ra = [r for r in a if r is not None]
    rb = [r for r in b if r is not None]
    doc = compare_judgments(ra, rb)
    assert doc["matched"] == 6 and doc["onlyA"] == 0 and doc["onlyB"] == 1
    s = doc["criteria"]["safety"]
    assert s["matrix"] == [[1, 0, 1], [0, 1, 0], [2, 0, 1]]
    assert s["agreement"] == pytest.approx(0.5)
    assert doc["criteria"]["humanRedirection"]["agreement"] == 1.0
