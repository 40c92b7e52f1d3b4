"""Every item of the KORA v2 fidelity inventory (docs/fidelity-v2.md) is carried where it
says, as tests/test_fidelity.py checks docs/fidelity.md; and docs/rendered-prompts-v2.md is
what the v2 templates render now."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import orjson
import pytest

from kora import benchmarks
from kora.benchmarks.schemas import Scenario
from kora.benchmarks.showcase import as_markdown, rendered_prompts
from kora.benchmarks.taxonomy import load_taxonomy
from kora.benchmarks.templates import render
from kora.benchmarks.v2 import schemas as v2
from tests.helpers import upstream
from tests.test_fidelity import (
    BEFORE,
    Item,
    check_places,
    normal,
    now_counts,
    now_table,
    parse,
)

REPO = Path(__file__).resolve().parents[1]
INVENTORY = REPO / "docs" / "fidelity-v2.md"
GOLDEN = REPO / "docs" / "rendered-prompts-v2.md"
EXAMPLE = REPO / "docs" / "example-scenario.json"
V2B = benchmarks.get("v2")
TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy" / "v2")
ITEMS = parse(INVENTORY.read_text(encoding="utf-8"))


@cache
def sections() -> dict[str, object]:
    scenario = Scenario.model_validate(orjson.loads(EXAMPLE.read_bytes()))
    return {r.name.split(" (")[0]: r for r in rendered_prompts(V2B, scenario, TAXONOMY)}


def place_text(place: str) -> str:
    kind, _, rest = place.partition(":")
    if kind == "mechanism":
        return next(m.rubric for m in TAXONOMY.mechanisms if m.id == rest)
    if kind == "risk":
        risk_id, _, field = rest.partition(".")
        value = getattr(TAXONOMY.risks[risk_id][1], field)
        assert isinstance(value, str), place
        return value
    if kind == "flavor":
        risk_id, _, flavor = rest.partition(".")
        flavors = TAXONOMY.risks[risk_id][1].scenarioFlavors or []
        return next(f.description for f in flavors if f.id == flavor)
    if kind == "ses":
        return v2.SES_DESCRIPTIONS[rest]
    if kind == "schema2":
        model, _, field = rest.partition(".")
        return str(getattr(v2, model).model_json_schema()["properties"][field]["description"])
    assert kind == "v2", f"unknown place {place!r}"
    name, _, part = rest.rpartition("/")
    rendered = sections().get(name)
    assert rendered is not None, f"no rendered v2 section {name!r}"
    if part == "schema":
        return json.dumps(rendered.schema.model_json_schema(), indent=2)  # type: ignore[attr-defined]
    text = getattr(rendered.prompt, part)  # type: ignore[attr-defined]
    assert text, f"{name} has no {part} part"
    return str(text)


@pytest.mark.parametrize("item", ITEMS, ids=[i.id for i in ITEMS])
def test_item_is_carried_where_the_inventory_says(item: Item) -> None:
    where = f"docs/fidelity-v2.md:{item.line} {item.id}"
    assert item.before in BEFORE, f"{where}: unknown before-state {item.before!r}"
    assert item.places, f"{where}: every v2 fact is carried"
    check_places(item, where, place_text)


def test_every_mechanism_and_new_risk_has_items() -> None:
    places = {p for i in ITEMS for p in i.places}
    for m in TAXONOMY.mechanisms:
        assert f"mechanism:{m.id}" in places, m.id
    for risk in ("privacy_and_personal_data_protection", "sensorimotor_displacement"):
        assert f"risk:{risk}.description" in places, risk
    for f in TAXONOMY.risks["privacy_and_personal_data_protection"][1].scenarioFlavors or []:
        assert f"flavor:privacy_and_personal_data_protection.{f.id}" in places, f.id


def test_ids_are_unique() -> None:
    ids = [i.id for i in ITEMS]
    assert len(ids) == len(set(ids))


def test_the_gradual_opening_drops_the_direct_rules() -> None:
    scenario = Scenario.model_validate(orjson.loads(EXAMPLE.read_bytes()))
    for flavor, direct in ((None, True), ("b_gradual", False), ("a_direct", True)):
        seed = scenario.seed.model_copy(update={"scenarioFlavorId": flavor})
        prompt = render("first_user_message", V2B.prompts_dir, risk=TAXONOMY.risks["cybersecurity"][1],
                        seed=seed, scenario=scenario.model_copy(update={"seed": seed}))  # fmt: skip
        text = normal(f"{prompt.system}\n{prompt.user}")
        assert ("risky intent or request from the scenario directly" in text) is direct
        assert ("water down the risky request" in text) is direct
        assert ("must already carry the central risky request" in text) is direct
        assert ("gradual accumulation" in text) is not direct


def test_ses_glosses_cover_every_bucket() -> None:
    assert set(v2.SES_DESCRIPTIONS) == {"low", "middle", "high"}


def test_rendered_prompts_v2_doc_is_up_to_date() -> None:
    scenario = Scenario.model_validate(orjson.loads(EXAMPLE.read_bytes()))
    now = as_markdown(rendered_prompts(V2B, scenario, TAXONOMY), V2B.rendered_intro)
    assert GOLDEN.read_text(encoding="utf-8") == now, (
        "docs/rendered-prompts-v2.md is out of date: regenerate it with `kora --benchmark v2 "
        "prompts docs/example-scenario.json -o docs/rendered-prompts-v2.md --force`"
    )


def test_m6_precondition_is_an_invitation_as_canonical() -> None:
    """The canonical M6 applies when the child *invites* talk of the AI's own nature;
    asking is only one way to invite, so the rubric must not narrow it to asking."""
    source = upstream("v2/packages/benchmark/data/mechanisms.ts").read_text()
    canonical = source.split('id: "anthropomorphism"', 1)[1].split("DEFINITION:", 1)[0]
    assert "child invites the AI" in canonical
    rubric = next(m.rubric for m in TAXONOMY.mechanisms if m.id == "anthropomorphism")
    precondition = rubric.split("DEFINITION:", 1)[0]
    assert "child invites the AI" in precondition
    assert "asks" not in precondition


def repeated_runs(line: str, n: int = 3) -> set[str]:
    """Runs of `n` words that occur twice, without overlapping, in one line."""
    words = re.findall(r"[a-z0-9']+", line.lower())
    first: dict[tuple[str, ...], int] = {}
    found = set()
    for i in range(len(words) - n + 1):
        run = tuple(words[i : i + n])
        if run in first and i - first[run] >= n:
            found.add(" ".join(run))
        first.setdefault(run, i)
    return found


def test_no_grade_line_of_a_rubric_repeats_itself() -> None:
    """A grade says each thing once (M4's "failing" once named the child's judgement
    twice)."""
    repeats = {
        f"{m.code}: {line[:40]}": runs
        for m in TAXONOMY.mechanisms
        for line in m.rubric.splitlines()
        if line.startswith(('- "exemplary"', '- "adequate"', '- "failing"'))
        and (runs := repeated_runs(line))
    }
    assert not repeats, repeats


def test_now_table_matches_the_items() -> None:
    """The counts of the state now at the head of docs/fidelity-v2.md are the tables'."""
    assert now_table(INVENTORY.read_text(encoding="utf-8")) == now_counts(ITEMS)
