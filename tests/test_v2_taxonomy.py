"""The v2 taxonomy (data/taxonomy/v2) against the canonical one: ids, order, flags,
lengths and flavor shares identical; texts in the project's words."""

from __future__ import annotations

import orjson

from kora.benchmarks.taxonomy import load_taxonomy
from tests.helpers import REPO, upstream
from tests.test_taxonomy import REPLY_WORDS, opening

V1 = load_taxonomy(REPO / "data" / "taxonomy")
V2 = load_taxonomy(REPO / "data" / "taxonomy" / "v2")


def canonical() -> list[dict[str, object]]:
    return orjson.loads(upstream("v2/packages/benchmark/data/risks.json").read_bytes())  # type: ignore[no-any-return]


def test_ids_order_flags_and_lengths_are_the_canonical_ones() -> None:
    data = canonical()
    assert [c["id"] for c in data] == [c.id for c in V2.categories]
    for c, ours in zip(data, V2.categories, strict=True):
        assert c["name"] == ours.name
        for r, mine in zip(c["risks"], ours.risks, strict=True):  # type: ignore[call-overload]
            assert (r["id"], r["name"]) == (mine.id, mine.name)
            assert r["conversationLength"] == mine.conversationLength
            assert bool(r.get("provideUserContext")) == mine.provideUserContext
            assert ("scenarioGuidance" in r) == (mine.scenarioGuidance is not None)
    assert len(V2.risks) == 26 and "sycophancy" not in V2.risks
    assert V2.benchmark == "v2" and V1.benchmark == "v1"


def test_the_shared_risks_keep_the_v1_texts() -> None:
    for rid, (_, risk) in V2.risks.items():
        if rid in V1.risks:
            old = V1.risks[rid][1]
            assert (risk.description, risk.scenarioGuidance) == (
                old.description, old.scenarioGuidance)  # fmt: skip


def test_the_flavors_have_the_canonical_shares_and_lengths() -> None:
    data = {r["id"]: r for c in canonical() for r in c["risks"]}  # type: ignore[attr-defined]
    for rid, (_, risk) in V2.risks.items():
        theirs = data[rid].get("scenarioFlavors") or []
        mine = risk.scenarioFlavors or []
        assert [(f["id"], f["proportion"], f.get("conversationLength")) for f in theirs] == [
            (f.id, f.proportion, f.conversationLength) for f in mine
        ]
    privacy = V2.risks["privacy_and_personal_data_protection"][1]
    assert privacy.turns() == 3 and privacy.turns("b_gradual") == 4


def test_the_mechanisms_are_the_canonical_seven() -> None:
    assert [(m.id, m.code) for m in V2.mechanisms] == [
        ("sycophancy", "M1"), ("epistemicHumility", "M2"), ("manipulativeEngagement", "M3"),
        ("nonManipulativeFraming", "M4"), ("fictionalFramingBypass", "M5"),
        ("anthropomorphism", "M6"), ("humanRedirection", "M7"),
    ]  # fmt: skip
    assert [m.code for m in V2.mechanisms if m.precondition] == ["M3", "M5", "M6", "M7"]


def test_no_definition_is_narrowed_to_replies() -> None:
    """As in v1 (tests/test_taxonomy.py): where the canonical definition opens on content,
    ours does not open on "a reply"; the two new risks included."""
    theirs = {r["id"]: r["description"] for c in canonical() for r in c["risks"]}  # type: ignore[attr-defined]
    narrowed = [
        risk_id
        for risk_id, (_, ours) in V2.risks.items()
        if REPLY_WORDS.search(opening(ours.description))
        and not REPLY_WORDS.search(opening(theirs[risk_id]))
    ]
    assert not narrowed, narrowed
