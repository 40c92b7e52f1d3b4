"""Where two targets differ, cell by cell (kora.analysis.stats.cells): the cells, their
paired tables counted again here, the statistics against independent values (statsmodels'
exact McNemar and multiple-test adjustment, published paired-difference intervals), v1
and v2, people's grades over the judge's, and the gate's reading."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from kora.analysis.records import TestRecord
from kora.analysis.report.summary import records_of
from kora.analysis.stats.cells import (
    SCHEMA,
    cells_that_differ_first,
    compare_cells,
    differs,
    family_size,
    worse_cells,
)
from kora.analysis.stats.people import people_grade, with_people_grades
from kora.errors import InputError
from tests.comparedata import per_test, records, table_pairs
from tests.reportdata import make_judgments

RISKS = ("cybersecurity", "violence_and_physical_harm", "self_harm_and_suicide")


def pair_of(
    table: tuple[int, int, int, int], grade: str = "failing", version: str = "v1", **kw: Any
) -> tuple[list[TestRecord], list[TestRecord]]:
    a, b = [], []
    for i, (ga, gb) in enumerate(table_pairs(*table, grade=grade)):
        a.append(per_test(f"s{i}", ga, version=version, **kw))
        b.append(per_test(f"s{i}", gb, version=version, **kw))
    return records(a), records(b)


def cell(doc: dict[str, Any], cid: str) -> dict[str, Any]:
    (c,) = [c for c in doc["cells"] if c["id"] == cid]
    return c


@pytest.mark.timeout(30)
def test_fixture_cells_counted_again_and_against_statsmodels() -> None:
    bad = records_of(make_judgments("bad", flip=True))
    good = records_of(make_judgments("good"))
    doc = compare_cells(bad, good, "bad", "good", risk_order=RISKS[::-1])
    assert doc["schema"] == SCHEMA and doc["benchmark"] == "v1"
    assert (doc["paired"], doc["onlyA"], doc["onlyB"]) == (40, 0, 0)
    ids = [c["id"] for c in doc["cells"]]
    # each category holds one risk: its cell is the risk's; two ages, two prompts
    assert ids == [
        "safety/overall",
        "safety/risk/violence_and_physical_harm",
        "safety/risk/cybersecurity",
        "safety/ageRange/7to9",
        "safety/ageRange/13to17",
        "safety/prompt/default",
        "safety/prompt/child",
        "anthropomorphism/overall",
        "epistemicHumility/overall",
        "humanRedirection/overall",
    ]
    ja = {r.pair_key: r for r in bad if r.criteria}
    jb = {r.pair_key: r for r in good if r.criteria}
    field = {"risk": "risk", "ageRange": "age", "prompt": "prompt"}
    for c in doc["cells"]:
        keys = [
            k
            for k in ja
            if c["value"] is None or getattr(ja[k], field[c["dimension"]]) == c["value"]
        ]
        assert c["n"] == len(keys)
        for g in ("failing", "exemplary"):
            o = c[g]
            ga = [ja[k].criteria[c["criterion"]].grade == g for k in keys]
            gb = [jb[k].criteria[c["criterion"]].grade == g for k in keys]
            both = list(zip(ga, gb, strict=True))
            table = [
                [both.count((True, True)), both.count((True, False))],
                [both.count((False, True)), both.count((False, False))],
            ]
            assert [[o["both"], o["aOnly"]], [o["bOnly"], o["neither"]]] == table
            assert o["p"] == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-9)
            assert o["a"]["k"] == sum(ga) and o["b"]["k"] == sum(gb)
            assert o["diff"] == pytest.approx((sum(ga) - sum(gb)) / len(keys), abs=1e-6)
        crit = c["criterion"]
        differ = [ja[k].criteria[crit].grade != jb[k].criteria[crit].grade for k in keys]
        assert len(c["disagree"]) == sum(differ)
    # the adjustments, each outcome its own family, as statsmodels gives them directly
    for g in ("failing", "exemplary"):
        ps = [c[g]["p"] for c in doc["cells"]]
        for method, key, pkey in (("holm", "holm", "pHolm"), ("fdr_bh", "bh", "pBH")):
            reject, adjusted, _, _ = multipletests(ps, alpha=0.05, method=method)
            assert [c[g][key] for c in doc["cells"]] == list(reject)
            assert [c[g][pkey] for c in doc["cells"]] == pytest.approx(list(adjusted))
            assert doc["families"][g][key] == sum(reject)
    cyber = cell(doc, "safety/risk/cybersecurity")["failing"]
    assert (cyber["aOnly"], cyber["bOnly"], cyber["worse"], cyber["holm"]) == (14, 0, "a", True)
    assert cell(doc, "safety/risk/cybersecurity")["exemplary"]["worse"] == "a"  # fewer exemplary
    assert [c["id"] for c in cells_that_differ_first(doc)][:2] == [
        "safety/overall",
        "safety/risk/cybersecurity",
    ]
    # BH finds more than Holm: the age ranges and the child prompt
    assert differs(cell(doc, "safety/ageRange/7to9"), "fdr_bh")
    assert not differs(cell(doc, "safety/ageRange/7to9"), "holm")


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("table", "interval", "low", "high", "digits"),
    [
        # Newcombe (1998), method 10; Tango (1998) Table VII (tests/test_compare_stats.py)
        ((20, 12, 2, 16), "newcombe", 0.0562, 0.3292, 4),
        ((4, 9, 3, 16), "tango", -0.027, 0.390, 3),
    ],
)
def test_a_cell_gives_the_published_interval(
    table: tuple[int, int, int, int], interval: Any, low: float, high: float, digits: int
) -> None:
    a, b = pair_of(table)
    doc = compare_cells(a, b, interval=interval)
    o = cell(doc, "safety/overall")["failing"]
    assert (o["both"], o["aOnly"], o["bOnly"], o["neither"]) == table
    assert (round(o["low"], digits), round(o["high"], digits)) == (low, high)
    assert doc["interval"] == interval
    # one risk, one age, one prompt: safety's overall cell and the behaviours only
    assert [c["id"] for c in doc["cells"]][:2] == ["safety/overall", "anthropomorphism/overall"]


@pytest.mark.timeout(30)
def test_categories_with_two_risks_and_family_size() -> None:
    a_docs, b_docs = [], []
    n = 0
    for risk, age, prompt in itertools.product(RISKS, ("7to9", "13to17"), ("default", "child")):
        for i in range(3):
            n += 1
            a_docs.append(
                per_test(
                    f"s{n}", "failing" if i == 0 else "adequate", risk=risk, age=age, prompt=prompt
                )
            )
            b_docs.append(per_test(f"s{n}", "adequate", risk=risk, age=age, prompt=prompt))
    doc = compare_cells(records(a_docs), records(b_docs))
    ids = [c["id"] for c in doc["cells"]]
    # physical_and_legal_safety holds two risks: a cell of its own; online_safety's one
    # risk is its risk's cell
    assert "safety/riskCategory/physical_and_legal_safety" in ids
    assert "safety/riskCategory/online_safety" not in ids
    assert len(ids) == family_size(
        ["safety", "anthropomorphism", "epistemicHumility", "humanRedirection"],
        {"online_safety": ["cybersecurity"], "physical_and_legal_safety": list(RISKS[1:])},
        ["7to9", "13to17"],
        ["default", "child"],
    )
    assert family_size(["safety"], {"c": ["r"]}, ["7to9"], ["default"]) == 1


@pytest.mark.timeout(30)
def test_v2_mechanisms_not_triggered_pairs_left_out() -> None:
    a_docs, b_docs = [], []
    for i in range(12):
        trig: dict[str, Any] = {"notTriggered": True} if i < 4 else "failing"
        a_docs.append(per_test(f"s{i}", "adequate", version="v2", others={"sycophancy": trig}))
        b_docs.append(
            per_test(
                f"s{i}",
                "adequate",
                version="v2",
                others={"sycophancy": "adequate" if i < 8 else "failing"},
            )
        )
    doc = compare_cells(records(a_docs), records(b_docs))
    assert doc["benchmark"] == "v2"
    syc = cell(doc, "sycophancy/overall")
    assert syc["n"] == 8  # the 4 pairs where A's judge found it not triggered are out
    assert (syc["failing"]["aOnly"], syc["failing"]["bOnly"], syc["failing"]["both"]) == (4, 0, 4)
    assert "fictionalFramingBypass/overall" in [c["id"] for c in doc["cells"]]


@pytest.mark.timeout(30)
def test_two_versions_are_refused() -> None:
    a, _ = pair_of((1, 1, 1, 1))
    _, b = pair_of((1, 1, 1, 1), version="v2")
    with pytest.raises(InputError, match="KORA v1 results and B KORA v2"):
        compare_cells(a, b)


@pytest.mark.timeout(30)
def test_worse_cells_any_cell_overall_and_exemplary() -> None:
    bad = records_of(make_judgments("bad", flip=True))
    good = records_of(make_judgments("good"))
    doc = compare_cells(bad, good, "bad", "good")
    assert [(c["id"], g) for c, g in worse_cells(doc)] == [
        ("safety/overall", "failing"),
        ("safety/risk/cybersecurity", "failing"),
    ]
    assert [c["id"] for c, _ in worse_cells(doc, overall=True)] == ["safety/overall"]
    assert len(worse_cells(doc, adjustment="fdr_bh")) == 5
    ex = worse_cells(doc, outcomes=("failing", "exemplary"))
    assert ("safety/overall", "exemplary") in [(c["id"], g) for c, g in ex]
    # the other way round, nothing is worse
    assert worse_cells(compare_cells(good, bad)) == []


@pytest.mark.timeout(30)
def test_people_grades_over_the_judges() -> None:
    assert people_grade(["exemplary", "failing", "adequate"]) == "adequate"
    assert people_grade(["exemplary", "failing"]) == "failing"  # even: the worse middle one
    a, _ = pair_of((0, 2, 0, 2))
    labels = [
        {a[0].key: {"safety": {"grade": "adequate"}}, a[2].key: {"safety": {"note": "?"}}},
        {a[0].key: {"safety": {"grade": "exemplary"}, "sycophancy": {"grade": "failing"}}},
    ]
    out, replaced = with_people_grades(a, labels)
    assert replaced == 1
    assert out[0].criteria["safety"].grade == "adequate"  # median of adequate, exemplary
    assert [r.criteria["safety"].grade for r in out[1:]] == ["failing", "adequate", "adequate"]
    assert a[0].criteria["safety"].grade == "failing"  # the input is left as it was
    doc = compare_cells(out, a, human={"a": 1, "b": 0})
    assert doc["grades"] == "human" and doc["humanGrades"] == {"a": 1, "b": 0}


@pytest.mark.timeout(60)
def test_v2_leaderboard_pairs_and_ranks() -> None:
    from kora.analysis.report.leaderboard import build_leaderboard
    from kora.analysis.report.pages import render_leaderboard

    new, old = pair_of((2, 10, 1, 27), version="v2", others={"sycophancy": "failing"})
    recs = {"new": new, "old": old}
    entries = {t: {"target": t, "benchmark": "v2", "scores": []} for t in recs}
    doc = build_leaderboard(entries, recs)
    (pair,) = doc["pairs"]
    assert pair["benchmark"] == "v2" and "sycophancy/overall" in [c["id"] for c in pair["cells"]]
    assert doc["ranking"]["targets"]["old"]["rank"] == 1
    assert doc["ranking"]["targets"]["new"]["tiedWith"] == []
    page = render_leaderboard(doc, None, recs)
    assert "Sycophancy: all tests" in page and 'id="kora-pairs"' in page


@pytest.mark.timeout(30)
def test_targets_are_ranked_only_when_two_or_more_share_a_scenario() -> None:
    """The report's ranking asks this before it ranks (bootstrap_ranks takes it as given)."""
    from dataclasses import replace

    from kora.analysis.report.pairs import rank_intervals

    good = records_of(make_judgments("good"))
    bad = records_of(make_judgments("bad", flip=True))
    elsewhere = [replace(r, scenario_id=f"other-{r.scenario_id}") for r in bad]
    assert rank_intervals({"good": good}) is None
    assert rank_intervals({"good": good, "elsewhere": elsewhere}) is None
    ranked = rank_intervals({"good": good, "bad": bad})
    assert ranked is not None and ranked["targets"]["good"]["rank"] == 1
