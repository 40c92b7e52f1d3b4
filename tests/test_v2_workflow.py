"""`benchmark: v2` end to end with the mock provider: the canonical scenarios imported, a
target run, results.json in the canonical shape; a population seed plan generated."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest
import yaml

from tests.helpers import MECHANISMS, copy_workflow, upstream
from tests.workflows import snakemake

pytestmark = pytest.mark.slow

RELATIONSHIP = {
    "sexual_grooming_and_boundary_violations",
    "grooming_and_manipulation",
    "parasocial_attachment_and_emotional_dependency",
}
V2 = {
    "benchmark": "v2",
    "seed_model": "mock",
    "expand_model": "mock",
    "user_model": "mock",
    "judges": ["mock"],
    "targets": {"tiny": {"model": "mock", "prompts": ["default", "child"]}},
}


def kora(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kora.commands.main", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )


CELLS = {"Misunderstanding Consequences", "Rule Testing / Boundary Pushing"}
GRID = {"age_ranges": ["13to17"],
        "motivations": ["misunderstanding_consequences", "rule_testing_boundary_pushing"]}  # fmt: skip


def one_scenario_per_risk(dest: Path) -> Path:
    """A canonical scenario of each of the 26 risks, all in two motivations of 13-to-17 year
    olds (a small grid), and one of the privacy risk's gradual flavor (4 turns) moved there."""
    seen: set[str] = set()
    picked = []
    gradual = None
    for line in upstream("v2/data/scenarios.jsonl").read_bytes().splitlines():
        obj = orjson.loads(line)
        seed = obj["seed"]
        if seed.get("scenarioFlavorId") == "b_gradual" and gradual is None:
            seed["ageRange"] = "13to17"
            seed["childAge"] = 14
            seed["motivation"] = {"name": "Rule Testing / Boundary Pushing",
                                  "description": "Probing what is allowed or possible"}  # fmt: skip
            gradual = obj
        elif (
            seed["riskId"] not in seen
            and seed["ageRange"] == "13to17"
            and (seed["motivation"]["name"] in CELLS)
        ):
            seen.add(seed["riskId"])
            picked.append(obj)
    assert len(seen) == 26 and gradual is not None
    dest.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in [*picked, gradual]))
    return dest


@pytest.mark.slow
def test_canonical_scenarios_give_canonical_results(tmp_path: Path) -> None:
    work = copy_workflow(tmp_path)
    (work / "tiny.yaml").write_text(yaml.safe_dump({**V2, "grid": GRID}))
    file = one_scenario_per_risk(tmp_path / "scenarios.jsonl")
    imported = kora(work, "import-scenarios", str(file), "--configfile", "tiny.yaml")
    assert imported.returncode == 0, imported.stderr
    assert "imported 27 scenarios" in imported.stderr

    run = snakemake(work, "results-v2/tiny/results.json")
    assert run.returncode == 0, run.stderr[-3000:]
    results = orjson.loads((work / "results-v2/tiny/results.json").read_bytes())
    assert results["benchmark"] == "v2" and results["complete"] is True
    risks = {s["riskId"] for s in results["scores"]}
    assert len(risks) == 26 and "sycophancy" not in risks
    assert {"privacy_and_personal_data_protection", "sensorimotor_displacement"} <= risks
    assert results["tests"] == 54  # 27 scenarios x 2 prompt variants
    for s in results["scores"]:
        sums = s["sums"]
        assert set(sums) == {"al", "as", "mechanisms"}
        assert list(sums["mechanisms"]) == list(MECHANISMS)
        for m, v in sums["mechanisms"].items():
            assert len(v) == 5, m
            # a not-triggered test adds to the last slot only, never to the grade tally
            assert v[0] + v[1] + v[2] + v[4] == sums["al"], (m, v)

    # the relationship risks talk for 8 turns (16 messages), the gradual privacy flavor
    # for 4, every other risk for 3
    lengths: Counter[tuple[str, str | None, int]] = Counter()
    for f in (work / "results-v2/tiny/judgments").rglob("*.jsonl"):
        for line in f.read_bytes().splitlines():
            j = orjson.loads(line)
            flavor = j["scenario"]["seed"].get("scenarioFlavorId")
            lengths[(j["scenario"]["riskId"], flavor, len(j["messages"]))] += 1
            assert set(j["mechanismAssessment"]) == set(MECHANISMS)
            assert "behaviorAssessment" not in j
    for risk, flavor, n in lengths:
        turns = 8 if risk in RELATIONSHIP else 4 if flavor == "b_gradual" else 3
        assert n == 2 * turns, (risk, flavor, n)
    assert {r for r, _, n in lengths if n == 16} == RELATIONSHIP
    assert sum(v for (_, f, _), v in lengths.items() if f == "b_gradual") == 2

    # kora aggregate of the run's judgments gives the same scores
    agg = kora(work, "aggregate", "results-v2/tiny", "-o", "agg.json", "--configfile", "tiny.yaml")
    assert agg.returncode == 0, agg.stderr
    again = orjson.loads((work / "agg.json").read_bytes())["scores"]
    key = lambda s: (s["riskId"], s["ageRange"], s["prompt"])  # noqa: E731
    assert sorted(again, key=key) == sorted(results["scores"], key=key)


@pytest.mark.slow
def test_a_population_plan_generates_its_seeds(tmp_path: Path) -> None:
    work = copy_workflow(tmp_path)
    config = {
        **V2,
        "grid": {
            "risks": ["privacy_and_personal_data_protection"],
            "total_seeds": 30,
            "distribution": "us-census-2020",
            "random_seed": 7,
        },
    }
    (work / "tiny.yaml").write_text(yaml.safe_dump(config))
    run = snakemake(work, "--until", "seeds")
    assert run.returncode == 0, run.stderr[-3000:]
    seeds = [
        orjson.loads(line)
        for f in sorted((work / "data/v2/seeds").rglob("*.jsonl"))
        for line in f.read_bytes().splitlines()
    ]
    assert len(seeds) == 30
    count = lambda k: Counter(s[k] for s in seeds)  # noqa: E731
    assert count("ageRange") == {"7to9": 8, "10to12": 8, "13to17": 14}
    assert count("childSES") == {"low": 8, "middle": 14, "high": 8}
    assert count("childRaceEthnicity") == {
        "white": 15, "hispanic": 8, "black": 4, "asian": 1, "other": 2}  # fmt: skip
    assert count("scenarioFlavorId") == {
        "a_direct": 8, "b_gradual": 12, "d_authority": 6, "e_fictional": 4}  # fmt: skip
    for s in seeds:  # the pinned age range holds whatever age the model wrote
        low, high = (int(x) for x in s["ageRange"].split("to"))
        assert low <= s["childAge"] <= high


def test_both_canonical_scenario_files_import_under_v2(tmp_path: Path) -> None:
    work = copy_workflow(tmp_path)
    (work / "tiny.yaml").write_text(yaml.safe_dump(V2))
    for name, n in (("scenarios.jsonl", 781), ("104-scenario-apps.strict.jsonl", 104)):
        file = upstream(f"v2/data/{name}")
        run = kora(work, "import-scenarios", str(file), "--replace", "--configfile", "tiny.yaml")
        assert run.returncode == 0, run.stderr
        assert f"imported {n} scenarios" in run.stderr
    # under v1 the v2 risks are unknown: the error names the file, line and risk
    v1 = kora(work, "import-scenarios", str(upstream("v2/data/scenarios.jsonl")), "--replace")
    assert v1.returncode != 0
    assert "scenarios.jsonl:" in v1.stderr and "privacy_and_personal_data_protection" in v1.stderr
