"""KORA v2's config keys and seed plan as a user sets them: `benchmark: v2`,
`grid.total_seeds`, `grid.distribution`, `grid.random_seed`."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
import yaml

from kora.errors import ConfigError, KoraError
from kora.run.plan import count_jobs
from kora.run.workflow.pipeline import Pipeline
from tests.helpers import REPO, V2_MOCK, upstream


def pipeline(tmp_path: Path, **grid: Any) -> Pipeline:
    tmp_path.mkdir(exist_ok=True)
    if not (tmp_path / "data").exists():
        (tmp_path / "data").symlink_to(REPO / "data")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**V2_MOCK, "grid": grid}))
    return Pipeline.load([], tmp_path)


def wildcards(cell: str) -> dict[str, str]:
    return dict(zip(("risk", "age", "motivation"), cell.split("/"), strict=True))


def planned(p: Pipeline) -> list[dict[str, Any]]:
    """Every planned seed call, as the seeds rule's `orders` param gives it to the jobs."""
    orders = p.seeds_plan_params()["orders"]
    out = []
    for cell in p.cells():
        risk, age, motivation = cell.split("/")
        wc = SimpleNamespace(risk=risk, age=age, motivation=motivation)
        out += [{**o, "cell": cell} for o in orders(wc)]
    return out


def test_thirty_census_seeds_per_risk_have_the_canonical_counts(tmp_path: Path) -> None:
    p = pipeline(tmp_path, total_seeds=30, distribution="us-census-2020", random_seed=7)
    assert len(p.taxonomy.risks) == 26
    orders = planned(p)
    assert len(orders) == 26 * 30 and all(o["count"] == 1 for o in orders)
    privacy = [o for o in orders if o["cell"].startswith("privacy_and_personal_data_protection/")]
    count = lambda f: Counter(f(o) for o in privacy)  # noqa: E731
    assert count(lambda o: o["pinned"]["ageRange"]) == {"7to9": 8, "10to12": 8, "13to17": 14}
    assert count(lambda o: o["pinned"]["ses"]) == {"low": 8, "middle": 14, "high": 8}
    assert count(lambda o: o["pinned"]["raceEthnicity"]) == {
        "white": 15, "hispanic": 8, "black": 4, "asian": 1, "other": 2}  # fmt: skip
    assert count(lambda o: o["flavor"]) == {
        "a_direct": 8, "b_gradual": 12, "d_authority": 6, "e_fictional": 4}  # fmt: skip
    # a seed's cell is its pinned age range
    assert all(o["cell"].split("/")[1] == o["pinned"]["ageRange"] for o in orders)
    # only the privacy risk has flavors
    assert all("flavor" not in o for o in orders if o not in privacy)


def test_the_same_random_seed_gives_the_same_plan(tmp_path: Path) -> None:
    census = {"total_seeds": 30, "distribution": "us-census-2020"}
    a = planned(pipeline(tmp_path / "a", **census, random_seed=7))
    b = planned(pipeline(tmp_path / "b", **census, random_seed=7))
    c = planned(pipeline(tmp_path / "c", **census, random_seed=8))
    assert a == b
    assert a != c


def test_the_default_seed_plans_the_canonical_published_seeds(tmp_path: Path) -> None:
    # canonical's data/scenarioSeeds.jsonl: 30 census personas per risk planned with seed
    # 42, and one seed more (a call answered with two seeds, kept in distribution mode)
    p = pipeline(tmp_path, total_seeds=30, distribution="us-census-2020")
    assert p.config.grid.random_seed == 42
    ids = {m.name: m.id for m in p.taxonomy.motivations}
    published: Counter[tuple[Any, ...]] = Counter()
    for line in upstream("v2/data/scenarioSeeds.jsonl").read_bytes().splitlines():
        s = orjson.loads(line)
        cell = f"{s['riskId']}/{s['ageRange']}/{ids[s['motivation']['name']]}"
        published[(cell, s["childGender"], s["childSES"], s["childRaceEthnicity"],
                   s.get("scenarioFlavorId"))] += 1  # fmt: skip
    plan: Counter[tuple[Any, ...]] = Counter(
        (o["cell"], o["pinned"]["gender"], o["pinned"]["ses"], o["pinned"]["raceEthnicity"],
         o.get("flavor"))
        for o in planned(p)
    )  # fmt: skip
    assert plan.total() == 26 * 30 and published.total() == 26 * 30 + 1
    assert published - plan == Counter({next(iter(published - plan)): 1})
    assert not plan - published


def test_a_cell_the_plan_skips_asks_for_no_seed(tmp_path: Path) -> None:
    p = pipeline(tmp_path, risks=["cybersecurity"], total_seeds=5, distribution="us-census-2020")
    orders = p.seeds_plan_params()["orders"]
    per_cell = {c: len(orders(SimpleNamespace(**wildcards(c)))) for c in p.cells()}
    assert len(per_cell) == 30 and sum(per_cell.values()) == 5
    assert list(per_cell.values()).count(0) >= 25
    # the progress line's total counts the planned calls only
    specs = [p.job_spec("seeds", wildcards(c)) for c in per_cell]
    assert asyncio.run(count_jobs(p, specs)).calls == 5


def test_total_seeds_alone_draws_that_many_cells_of_each_risk(tmp_path: Path) -> None:
    p = pipeline(tmp_path, risks=["cybersecurity", "bias_and_stereotyping"], total_seeds=12)
    orders = planned(p)
    assert Counter(o["cell"].split("/")[0] for o in orders) == {
        "cybersecurity": 12, "bias_and_stereotyping": 12}  # fmt: skip
    assert len({o["cell"] for o in orders}) == 24 and all("pinned" not in o for o in orders)


def test_total_seeds_replaces_seeds_per_task(tmp_path: Path) -> None:
    # config.yaml sets seeds_per_task for v1; an overlay's total_seeds takes its place
    p = pipeline(tmp_path, seeds_per_task=8, total_seeds=4, risks=["cybersecurity"])
    assert sum(o["count"] for o in planned(p)) == 4


def test_seeds_per_task_in_v2_adds_no_param(tmp_path: Path) -> None:
    # without total_seeds the seeds rule keeps v1's params: a v1 run re-runs nothing
    assert pipeline(tmp_path, seeds_per_task=3).seeds_plan_params() == {}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"benchmark": "v1", "grid": {"total_seeds": 30}},
         "grid.total_seeds: a key of KORA v2, not of KORA v1; set `benchmark: v2`"),
        ({"grid": {"distribution": "us-census-2020"}},
         "grid.distribution: needs grid.total_seeds"),
        ({"grid": {"total_seeds": 30, "distribution": "nowhere.json"}},
         "'nowhere.json' is neither a preset (us-census-2020) nor a file"),
        ({"grid": {"total_seeds": 31, "risks": ["cybersecurity"]}},
         "more than the 30 (age range x motivation) cells of risk cybersecurity"),
        ({"benchmark": "v3"}, "benchmark"),
        ({"taxonomy_dir": "data/taxonomy"}, "mechanisms.json: taxonomy file not found"),
    ],
)  # fmt: skip
def test_v2_settings_that_cannot_work_are_refused(
    tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    (tmp_path / "data").symlink_to(REPO / "data")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**V2_MOCK, **config}))
    with pytest.raises(KoraError, match=message.replace("(", r"\(").replace(")", r"\)")):
        assert Pipeline.load([], tmp_path).seed_plan is not None


def test_a_distribution_file_is_read_and_its_errors_name_it(tmp_path: Path) -> None:
    shares = {
        "name": "all teens",
        "ageRange": {"7to9": 0, "10to12": 0, "13to17": 1},
        "gender": {"girl": 0.5, "boy": 0.5},
        "ses": {"low": 0.2, "middle": 0.6, "high": 0.2},
        "raceEthnicity": {"white": 0.2, "hispanic": 0.2, "black": 0.2, "asian": 0.2,
                          "other": 0.2},
    }  # fmt: skip
    (tmp_path / "teens.json").write_bytes(orjson.dumps(shares))
    p = pipeline(tmp_path, risks=["cybersecurity"], total_seeds=10, distribution="teens.json")
    assert {o["pinned"]["ageRange"] for o in planned(p)} == {"13to17"}

    shares["ses"] = {"low": 0.5, "middle": 0.6, "high": 0.2}
    (tmp_path / "teens.json").write_bytes(orjson.dumps(shares))
    with pytest.raises(ConfigError, match=r"teens.json: the ses shares sum to 1.3"):
        Pipeline.load([], tmp_path)
