"""Every item of the fidelity inventory (docs/fidelity.md) is carried where it says.

The inventory lists each fact of the reference prompts, taxonomy and schema descriptions
with the project's key terms for it and the place that carries it; one test per item checks
that every key term is in that place, so removing a fact, or editing the inventory without
the prompts, fails here. See the head of docs/fidelity.md for the grammar of places.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest

import kora.benchmarks.outcomes
import kora.benchmarks.schemas
from kora import benchmarks
from kora.benchmarks.schemas import Scenario
from kora.benchmarks.showcase import SAMPLE_MEMORY, rendered_prompts
from kora.benchmarks.taxonomy import AGE_RANGE_LABELS, load_taxonomy
from kora.benchmarks.templates import Prompt

REPO = Path(__file__).resolve().parents[1]
INVENTORY = REPO / "docs" / "fidelity.md"
EXAMPLE = REPO / "docs" / "example-scenario.json"
V1 = benchmarks.get("v1")
TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy")

ROW = re.compile(r"^\|\s*([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+)\s*\|(.*)\|\s*$")
BEFORE = ("carried", "changed", "missing", "added", "n/a")
NOT_CARRIED = "—"


def section_name(name: str) -> str:
    """A rendered prompt's section name without a trailing remark in brackets."""
    return name.split(" (")[0]


@dataclass(frozen=True)
class Item:
    id: str
    section: str  # the "## " heading the item is under
    fact: str
    terms: tuple[str, ...]
    places: tuple[str, ...]
    before: str
    note: str
    line: int


def parse(text: str) -> list[Item]:
    items = []
    section = ""
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            section = line[3:].strip()
        m = ROW.match(line)
        if not m:
            continue
        cells = [c.strip() for c in m.group(2).split("|")]
        assert len(cells) == 5, f"docs/fidelity.md:{lineno}: expected 6 columns"
        fact, terms, where, before, note = cells
        places = () if where == NOT_CARRIED else tuple(p.strip() for p in where.split(" + "))
        found = tuple(re.findall(r"`([^`]+)`", terms))
        items.append(Item(m.group(1), section, fact, found, places, before, note, lineno))
    return items


ITEMS = parse(INVENTORY.read_text(encoding="utf-8"))


def normal(text: str) -> str:
    return " ".join(text.lower().split())


# --- the places ---------------------------------------------------------------------------


def example() -> Scenario:
    return Scenario.model_validate(orjson.loads(EXAMPLE.read_bytes()))


@cache
def sections(overrides: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """The rendered sections (name -> Rendered) for the example, seed fields overridden."""
    scenario = example()
    if overrides:
        seed = scenario.seed.model_copy(update=dict(overrides))
        scenario = scenario.model_copy(update={"seed": seed})
    out = {r.name.split(" (")[0]: r for r in rendered_prompts(V1, scenario, TAXONOMY)}
    if not overrides:
        # two variants the documentation does not show: a batch of 3, and a retry whose
        # rejected attempt had a memory
        out["seeds [3 seeds]"] = rendered_prompts(V1, scenario, TAXONOMY, count=3)[0]
        with_memory = scenario.model_copy(update={"modelMemory": SAMPLE_MEMORY})
        retry = {r.name.split(" (")[0]: r for r in rendered_prompts(V1, with_memory, TAXONOMY)}
        out["scenario [retry with memory]"] = retry["scenario [retry]"]
    return out


def place_text(place: str) -> str:
    """The text a place names; an AssertionError names a place that does not exist."""
    if place.startswith("schema:"):
        model_name, _, field = place[len("schema:") :].partition(".")
        model = _model(model_name)
        assert model is not None, f"no model {model_name} in kora/benchmarks/"
        prop = model.model_json_schema()["properties"].get(field)
        assert prop is not None, f"{model_name} has no field {field}"
        assert "description" in prop, f"{model_name}.{field} has no description"
        return str(prop["description"])
    if place.startswith("risk:"):
        risk_id, _, field = place[len("risk:") :].partition(".")
        category = TAXONOMY.category_of(risk_id)
        value = getattr(TAXONOMY.risk(category.id, risk_id), field)
        assert isinstance(value, str), f"{place}: no text"
        return value
    if place.startswith("motivation:"):
        return TAXONOMY.motivations_by_id[place[len("motivation:") :]].description
    if place.startswith("age:"):
        return AGE_RANGE_LABELS[place[len("age:") :]]  # type: ignore[index]
    m = re.fullmatch(r"(.+?)(?:\{(.+)\})?/(system|user|schema)", place)
    assert m, f"unknown place {place!r}"
    name, overrides, part = m.groups()
    pairs = tuple(tuple(p.split("=", 1)) for p in overrides.split(",")) if overrides else ()
    rendered = sections(pairs).get(name)  # type: ignore[arg-type]
    assert rendered is not None, f"no rendered section {name!r}"
    if part == "schema":
        assert rendered.schema is not None, f"{name} has no schema"
        return json.dumps(rendered.schema.model_json_schema())
    prompt: Prompt = rendered.prompt
    text = getattr(prompt, part)
    assert text, f"{name} has no {part} part"
    return str(text)


# --- one test per inventory item ------------------------------------------------------------


@pytest.mark.parametrize("item", ITEMS, ids=[i.id for i in ITEMS])
def test_item_is_carried_where_the_inventory_says(item: Item) -> None:
    where = f"docs/fidelity.md:{item.line} {item.id}"
    assert item.before in BEFORE, f"{where}: unknown before-state {item.before!r}"
    if not item.places:
        assert not item.terms, f"{where}: a fact not carried has no key terms"
        assert item.note, f"{where}: a fact not carried needs a note saying why"
        return
    if item.before == "added":
        assert item.note, f"{where}: a project addition needs a note giving the reason"
    check_places(item, where, place_text)


def check_places(item: Item, where: str, text_of: Callable[[str], str]) -> None:
    """Each place of an item: a test that exists, or a text holding every key term."""
    for place in item.places:
        if place.startswith("test:"):
            path, _, name = place[len("test:") :].partition("::")
            source = (REPO / path).read_text(encoding="utf-8")
            assert f"def {name}(" in source, f"{where}: no test {name} in {path}"
            continue
        assert item.terms, f"{where}: no key terms for {place}"
        text = normal(text_of(place))
        missing = [t for t in item.terms if normal(t) not in text]
        assert not missing, f"{where}: not found in {place}: {missing}"


# --- the inventory itself -------------------------------------------------------------------


def test_ids_are_unique() -> None:
    ids = [i.id for i in ITEMS]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_every_rendered_section_has_inventory_items() -> None:
    named = {p.split("{")[0].rsplit("/", 1)[0] for i in ITEMS for p in i.places}
    missing = [name for name in sections() if name not in named]
    assert not missing, missing


def test_every_risk_motivation_and_age_range_has_items() -> None:
    places = {p for i in ITEMS for p in i.places}
    for category in TAXONOMY.categories:
        for risk in category.risks:
            assert f"risk:{risk.id}.description" in places, risk.id
            if risk.scenarioGuidance is not None:
                assert f"risk:{risk.id}.scenarioGuidance" in places, risk.id
    for motivation in TAXONOMY.motivations:
        assert f"motivation:{motivation.id}" in places, motivation.id
    for age in AGE_RANGE_LABELS:
        assert f"age:{age}" in places, age


SENT_MODELS = ("ModelScenarioSeed", "ModelScenarioLight", "ModelScenarioWithMemory",
               "ScenarioValidation", "TestAssessment", "BehaviorCriterionAssessment",
               "BehaviorAssessment")  # fmt: skip


def test_every_field_description_sent_is_in_the_inventory() -> None:
    """No description reaches a model without an inventory item (nothing added unexplained)."""
    places = {p for i in ITEMS for p in i.places}
    for name in SENT_MODELS:
        model = _model(name)
        for field, prop in model.model_json_schema()["properties"].items():
            if "description" not in prop:
                continue
            inherited = any(
                f"schema:{other}.{field}" in places
                for other in SENT_MODELS
                if field in _model(other).model_fields
                and _model(other).model_fields[field].description
                == model.model_fields[field].description
            )
            assert inherited, f"{name}.{field}: description without an inventory item"


def summary(items: list[Item]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for item in items:
        if item.before == "added":
            continue
        row = out.setdefault(item.section, {s: 0 for s in BEFORE if s != "added"})
        row[item.before] += 1
    return out


def test_summary_table_matches_the_items() -> None:
    """The counts at the head of docs/fidelity.md are the counts of the tables below."""
    text = INVENTORY.read_text(encoding="utf-8")
    head = text.split("<!-- summary -->")[1]
    table = {}
    for line in head.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[1].isdigit():
            table[cells[0]] = [int(c) for c in cells[1:]]
    expected = {
        section: [sum(c.values()), c["carried"], c["changed"], c["missing"], c["n/a"]]
        for section, c in summary(ITEMS).items()
    }
    total = [sum(v[k] for v in expected.values()) for k in range(5)]
    assert table == {**expected, "total": total}


def now_table(text: str) -> dict[str, int]:
    """The `<!-- now -->` table of an inventory: state -> count."""
    head = text.split("<!-- now -->")[1]
    table = {}
    for line in head.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[1].isdigit():
            table[cells[0]] = int(cells[1])
    return table


def now_counts(items: list[Item]) -> dict[str, int]:
    """The state of the inventory now: every row with a place is checked as carried above;
    a row without one is not sent to a model; `added` rows are the project's additions."""
    facts = [i for i in items if i.before != "added"]
    return {
        "reference facts": len(facts),
        "carried": sum(1 for i in facts if i.places),
        "changed": 0,
        "n/a (never sent to a model)": sum(1 for i in facts if not i.places),
        "project additions (`added` rows)": len(items) - len(facts),
    }


def test_now_table_matches_the_items() -> None:
    """The counts of the state now at the head of docs/fidelity.md are the tables'."""
    assert now_table(INVENTORY.read_text(encoding="utf-8")) == now_counts(ITEMS)


def _model(name: str) -> Any:
    """A model of the benchmark's records, wherever kora.benchmarks keeps it."""
    for module in (kora.benchmarks.schemas, kora.benchmarks.outcomes):
        found = getattr(module, name, None)
        if found is not None:
            return found
    return None
