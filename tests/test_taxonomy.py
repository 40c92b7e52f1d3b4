"""The project's taxonomy: shape, agreement with the reference IDs, and own wording."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from kora.benchmarks.schemas import AGE_RANGES
from kora.benchmarks.taxonomy import Taxonomy, load_taxonomy
from kora.errors import InputError

REPO = Path(__file__).resolve().parents[1]
TAXONOMY_DIR = REPO / "data" / "taxonomy"
UPSTREAM_DIR = Path(__file__).resolve().parents[2] / "shared" / "upstream"

# Shortest sentence (in characters) and word run that count as copied text.
MIN_SENTENCE_CHARS = 40
RUN_WORDS = 8


@pytest.fixture(scope="module")
def taxonomy() -> Taxonomy:
    return load_taxonomy(TAXONOMY_DIR)


@pytest.fixture(scope="module")
def upstream() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if not UPSTREAM_DIR.is_dir():
        pytest.skip(f"reference data not available at {UPSTREAM_DIR}")
    risks = json.loads((UPSTREAM_DIR / "risks.json").read_text(encoding="utf-8"))
    motivations = json.loads((UPSTREAM_DIR / "motivations.json").read_text(encoding="utf-8"))
    return risks, motivations


# --- shape ------------------------------------------------------------------------------


def test_counts(taxonomy: Taxonomy) -> None:
    assert len(taxonomy.categories) == 8
    assert sum(len(c.risks) for c in taxonomy.categories) == 25
    assert len(taxonomy.risks) == 25
    assert len(taxonomy.motivations) == 10


def test_motivation_ids_are_unique_slugs(taxonomy: Taxonomy) -> None:
    ids = [m.id for m in taxonomy.motivations]
    assert len(set(ids)) == len(ids)
    for motivation_id in ids:
        assert re.fullmatch(r"[a-z0-9_]+", motivation_id), motivation_id


def test_texts_are_filled_in(taxonomy: Taxonomy) -> None:
    for category in taxonomy.categories:
        for risk in category.risks:
            assert risk.description.strip(), risk.id
            if risk.scenarioGuidance is not None:
                assert risk.scenarioGuidance.strip(), risk.id
    for motivation in taxonomy.motivations:
        assert motivation.description.strip(), motivation.id


def test_optional_keys_only_when_set() -> None:
    """`provideUserContext` appears only as true and `scenarioGuidance` only when present."""
    raw = json.loads((TAXONOMY_DIR / "risks.json").read_text(encoding="utf-8"))
    for category in raw:
        for risk in category["risks"]:
            if "provideUserContext" in risk:
                assert risk["provideUserContext"] is True, risk["id"]
            if "scenarioGuidance" in risk:
                assert isinstance(risk["scenarioGuidance"], str), risk["id"]


def test_shards_in_taxonomy_order(taxonomy: Taxonomy) -> None:
    shards = taxonomy.shards()
    assert len(shards) == 750
    expected = [
        (category.id, risk.id, age, motivation.id)
        for category in taxonomy.categories
        for risk in category.risks
        for age in AGE_RANGES
        for motivation in taxonomy.motivations
    ]
    assert [(s.category_id, s.risk_id, s.age_range, s.motivation_id) for s in shards] == expected
    assert len({s.path for s in shards}) == 750
    first = shards[0]
    assert (first.category_id, first.risk_id, first.age_range) == (
        "physical_and_legal_safety",
        "violence_and_physical_harm",
        "7to9",
    )
    assert first.motivation_id == taxonomy.motivations[0].id


# --- malformed input --------------------------------------------------------------------


def _copy_taxonomy(tmp_path: Path) -> Path:
    directory = tmp_path / "taxonomy"
    directory.mkdir()
    for name in ("risks.json", "motivations.json"):
        shutil.copy(TAXONOMY_DIR / name, directory / name)
    return directory


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    directory = _copy_taxonomy(tmp_path)
    bad = directory / "risks.json"
    bad.write_text('[{"id": "x", "name": ', encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON") as info:
        load_taxonomy(directory)
    assert str(bad) in str(info.value)


def test_schema_error_names_the_file_and_item(tmp_path: Path) -> None:
    directory = _copy_taxonomy(tmp_path)
    bad = directory / "motivations.json"
    items = json.loads(bad.read_text(encoding="utf-8"))
    del items[3]["description"]
    bad.write_text(json.dumps(items), encoding="utf-8")
    with pytest.raises(InputError, match="item 3") as info:
        load_taxonomy(directory)
    message = str(info.value)
    assert str(bad) in message
    assert "description" in message


def test_not_a_list_names_the_file(tmp_path: Path) -> None:
    directory = _copy_taxonomy(tmp_path)
    bad = directory / "risks.json"
    bad.write_text('{"id": "x"}', encoding="utf-8")
    with pytest.raises(InputError, match="expected a JSON list") as info:
        load_taxonomy(directory)
    assert str(bad) in str(info.value)


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    directory = _copy_taxonomy(tmp_path)
    missing = directory / "motivations.json"
    missing.unlink()
    with pytest.raises(InputError, match="not found") as info:
        load_taxonomy(directory)
    assert str(missing) in str(info.value)


# --- agreement with the reference -------------------------------------------------------


def test_categories_match_reference(taxonomy: Taxonomy, upstream: Any) -> None:
    ref_risks, _ = upstream
    assert [(c.id, c.name) for c in taxonomy.categories] == [
        (c["id"], c["name"]) for c in ref_risks
    ]


def test_risks_match_reference(taxonomy: Taxonomy, upstream: Any) -> None:
    ref_risks, _ = upstream
    for ours, ref in zip(taxonomy.categories, ref_risks, strict=True):
        assert [(r.id, r.name) for r in ours.risks] == [
            (r["id"], r["name"]) for r in ref["risks"]
        ], ours.id


def test_flags_match_reference(taxonomy: Taxonomy, upstream: Any) -> None:
    ref_risks, _ = upstream
    ref_all = [r for c in ref_risks for r in c["risks"]]
    ours_all = [r for c in taxonomy.categories for r in c.risks]
    assert {r.id for r in ours_all if r.provideUserContext} == {
        r["id"] for r in ref_all if r.get("provideUserContext")
    }
    assert {r.id for r in ours_all if r.scenarioGuidance is not None} == {
        r["id"] for r in ref_all if r.get("scenarioGuidance") is not None
    }


# Our texts carry every fact of the reference's (docs/fidelity.md, tests/test_fidelity.py);
# a length far off the reference's means scope was dropped or added.
LENGTH_RATIO = (0.8, 1.5)


def test_texts_keep_the_reference_scope(taxonomy: Taxonomy, upstream: Any) -> None:
    ref_risks, ref_motivations = upstream
    ref = {r["id"]: r for c in ref_risks for r in c["risks"]}
    off = []
    for risk_id, (_, ours) in taxonomy.risks.items():
        for field in ("description", "scenarioGuidance"):
            theirs = ref[risk_id].get(field)
            if theirs is None:
                continue
            ratio = len(getattr(ours, field)) / len(theirs)
            if not LENGTH_RATIO[0] <= ratio <= LENGTH_RATIO[1]:
                off.append(f"{risk_id}.{field}: {ratio:.2f} of the reference length")
    for ours_m, theirs_m in zip(taxonomy.motivations, ref_motivations, strict=True):
        if len(ours_m.description) > 3 * len(theirs_m["description"]):
            off.append(f"{ours_m.id}: far longer than the reference (scope added?)")
    assert not off, off


# what narrows a definition to the AI's answer alone
REPLY_WORDS = re.compile(r"\b(repl(y|ies)|responses?)\b", re.IGNORECASE)


def opening(text: str) -> str:
    return text.split(". ", 1)[0]


def test_a_definition_about_content_is_not_narrowed_to_replies(
    taxonomy: Taxonomy, upstream: Any
) -> None:
    """Where the reference opens a risk's definition on content, outputs or behaviour, ours
    does not open on "a reply" (a narrower scope); only where the reference itself speaks
    of responses (cognitive mismatch) may ours."""
    ref_risks, _ = upstream
    ref = {r["id"]: r["description"] for c in ref_risks for r in c["risks"]}
    narrowed = [
        risk_id
        for risk_id, (_, ours) in taxonomy.risks.items()
        if REPLY_WORDS.search(opening(ours.description))
        and not REPLY_WORDS.search(opening(ref[risk_id]))
    ]
    assert not narrowed, narrowed


def test_motivation_names_match_reference(taxonomy: Taxonomy, upstream: Any) -> None:
    _, ref_motivations = upstream
    assert [m.name for m in taxonomy.motivations] == [m["name"] for m in ref_motivations]


# --- own wording ------------------------------------------------------------------------


def _reference_texts(
    ref_risks: list[dict[str, Any]], ref_motivations: list[dict[str, Any]]
) -> list[str]:
    texts = []
    for category in ref_risks:
        for risk in category["risks"]:
            texts.append(risk["description"])
            if risk.get("scenarioGuidance"):
                texts.append(risk["scenarioGuidance"])
    texts.extend(m["description"] for m in ref_motivations)
    return texts


def _our_texts(taxonomy: Taxonomy) -> list[str]:
    texts = []
    for category in taxonomy.categories:
        for risk in category.risks:
            texts.append(risk.description)
            if risk.scenarioGuidance:
                texts.append(risk.scenarioGuidance)
    texts.extend(m.description for m in taxonomy.motivations)
    texts.append((TAXONOMY_DIR / "README.md").read_text(encoding="utf-8"))
    return texts


def _normalise(text: str) -> str:
    text = text.replace("\u2011", "-").replace("\u2019", "'")
    return " ".join(text.lower().split())


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:'[a-z0-9]+)*", _normalise(text))


def test_no_reference_sentence_is_copied(taxonomy: Taxonomy, upstream: Any) -> None:
    ours = "\n".join(_normalise(t) for t in _our_texts(taxonomy))
    copied = []
    for text in _reference_texts(*upstream):
        for sentence in _normalise(text).split(". "):
            sentence = sentence.strip().rstrip(".")
            if len(sentence) >= MIN_SENTENCE_CHARS and sentence in ours:
                copied.append(sentence)
    assert not copied, copied


def test_no_run_of_reference_words_is_copied(taxonomy: Taxonomy, upstream: Any) -> None:
    def runs(text: str) -> set[tuple[str, ...]]:
        words = _words(text)
        return {tuple(words[i : i + RUN_WORDS]) for i in range(len(words) - RUN_WORDS + 1)}

    reference: set[tuple[str, ...]] = set()
    for text in _reference_texts(*upstream):
        reference |= runs(text)
    shared = set()
    for text in _our_texts(taxonomy):
        shared |= runs(text) & reference
    assert not shared, sorted(" ".join(run) for run in shared)
