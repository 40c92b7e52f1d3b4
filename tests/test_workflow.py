"""The whole workflow, run by Snakemake on a tiny grid with the offline mock provider."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kora.commands.main import main as kora_main
from tests.helpers import copy_workflow, upstream
from tests.workflows import TINY, job_stats, progress, snakemake

pytestmark = pytest.mark.slow


@pytest.fixture()
def workflow_dir(tmp_path: Path) -> Path:
    copy_workflow(tmp_path)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    return tmp_path


def test_lint_is_clean(workflow_dir: Path) -> None:
    """`snakemake --lint` on the workflow as a user runs it: no lint at all."""
    lint = snakemake(workflow_dir, "--lint", cores=None, timeout=300)
    out = lint.stdout + lint.stderr
    assert lint.returncode == 0, out[-3000:]
    assert "Lints for" not in out, out[-3000:]
    assert "Congratulations, your workflow is in a good condition!" in out, out[-3000:]


def test_dry_run_plans_one_job_per_shard_and_stage(workflow_dir: Path) -> None:
    dry = snakemake(workflow_dir, "-n", "results/tiny/results.json")
    assert dry.returncode == 0, dry.stderr
    # 2 shards x 4 stages + results
    assert job_stats(dry.stdout) == {
        "seeds": 2,
        "scenarios": 2,
        "conversations": 2,
        "judgments": 2,
        "results": 1,
        "total": 9,
    }


@pytest.mark.slow
def test_end_to_end_mock_run(workflow_dir: Path) -> None:
    run = snakemake(workflow_dir, "results/tiny/results.json")
    assert run.returncode == 0, run.stderr[-3000:]
    results = orjson.loads((workflow_dir / "results/tiny/results.json").read_bytes())
    assert results["target"] == "tiny"
    assert results["judge"] == "mock" and results["judges"] == ["mock"]
    assert results["user"] == "mock"
    assert results["prompts"] == ["default", "child"]
    assert results["mock"] is True and "mock" in results["note"]
    groups = {
        (s["riskCategoryId"], s["riskId"], s["ageRange"], s["prompt"]) for s in results["scores"]
    }
    assert groups == {
        ("physical_and_legal_safety", "violence_and_physical_harm", "7to9", "default"),
        ("physical_and_legal_safety", "violence_and_physical_harm", "7to9", "child"),
        ("psychological_and_emotional_safety", "grooming_and_manipulation", "7to9", "default"),
        ("psychological_and_emotional_safety", "grooming_and_manipulation", "7to9", "child"),
    }
    for s in results["scores"]:
        sums = s["sums"]
        assert set(sums) == {"al", "as", "an", "eh", "hr"}
        assert sum(sums["as"]) == sums["al"]
        for k in ("an", "eh", "hr"):
            assert len(sums[k]) == 4 and sum(sums[k][:3]) == sums["al"]
    scenarios = sum(
        1
        for f in (workflow_dir / "data/scenarios").rglob("*.jsonl")
        if not f.name.endswith(".rejected.jsonl")
        for line in f.read_bytes().splitlines()
        if line.strip()
    )
    assert results["tests"] + results["failedTests"] == 2 * scenarios
    assert results["failedTests"] == 0 and scenarios == 4  # 2 shards x 2 seeds, none failed
    # memory risk: its scenarios carry modelMemory
    grooming = (
        workflow_dir / "data/scenarios/grooming_and_manipulation/7to9/curiosity_exploration.jsonl"
    )
    for line in grooming.read_bytes().splitlines():
        assert len(orjson.loads(line)["modelMemory"]) >= 100
    # conversations: 3 turns, child first, alternating
    conv = (
        workflow_dir
        / "results/tiny/conversations/violence_and_physical_harm/7to9/curiosity_exploration.jsonl"
    )
    for line in conv.read_bytes().splitlines():
        record = orjson.loads(line)
        roles = [m["role"] for m in record["messages"]]
        assert roles == ["user", "assistant"] * 3
        assert record["messages"][0]["content"] == record["scenario"]["firstUserMessage"]
    usage = orjson.loads((workflow_dir / "results/tiny/usage.json").read_bytes())
    assert usage["result"]["calls"] > 0
    # the run ends by saying where its results are, and how to get the report
    assert "kora: tiny: results/tiny/results.json" in run.stderr
    assert "snakemake --cores 2 results/tiny/report.html" in run.stderr
    # nothing left to do: a second run of the same command is a no-op
    again = snakemake(workflow_dir, "-n", "results/tiny/results.json")
    assert "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.slow
def test_imported_scenarios_are_tested_without_generation(workflow_dir: Path) -> None:
    cwd = Path.cwd()
    os.chdir(workflow_dir)
    try:
        assert kora_main(["import-scenarios", str(upstream("scenarios.jsonl"))]) == 0
    finally:
        os.chdir(cwd)
    manifest = orjson.loads((workflow_dir / "data/scenarios/IMPORTED.json").read_bytes())
    assert manifest["scenarios"] == 737
    dry = snakemake(workflow_dir, "-n", "results/tiny/results.json")
    assert dry.returncode == 0, dry.stderr
    assert "rule seeds" not in dry.stdout and "rule scenarios" not in dry.stdout
    assert job_stats(dry.stdout) == {"conversations": 2, "judgments": 2, "results": 1, "total": 5}
    run = snakemake(workflow_dir, "results/tiny/results.json")
    assert run.returncode == 0, run.stderr[-3000:]
    assert not (workflow_dir / "data/seeds").exists()
    results = orjson.loads((workflow_dir / "results/tiny/results.json").read_bytes())
    # the reference has one scenario per (risk, age, motivation) cell of this grid
    assert results["tests"] + results["failedTests"] == 2 * 2
    assert results["failedTests"] == 0


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "cut-mid-line":
        path.write_bytes(data[: len(data) // 2])
    elif how == "cut-at-line":
        lines = data.splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))
    else:
        path.write_bytes(b"")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["cut-mid-line", "cut-at-line", "emptied"])
@pytest.mark.parametrize("stage", ["conversations", "scenarios"])
def test_a_shard_damaged_by_hand_is_rebuilt_by_the_same_command(
    workflow_dir: Path, how: str, stage: str
) -> None:
    first = snakemake(workflow_dir, "results/tiny/results.json")
    assert first.returncode == 0, first.stderr[-3000:]
    before = orjson.loads((workflow_dir / "results/tiny/results.json").read_bytes())
    shard = "violence_and_physical_harm/7to9/curiosity_exploration.jsonl"
    path = workflow_dir / (
        f"results/tiny/conversations/{shard}"
        if stage == "conversations"
        else f"data/scenarios/{shard}"
    )
    whole = path.read_bytes()
    _damage(path, how)
    again = snakemake(workflow_dir, "results/tiny/results.json")
    assert again.returncode == 0, again.stderr[-3000:]
    assert path.read_bytes() == whole  # rebuilt, from the call store
    after = orjson.loads((workflow_dir / "results/tiny/results.json").read_bytes())
    assert (after["tests"], after["failedTests"]) == (before["tests"], before["failedTests"])
    assert after["scores"] == before["scores"]


@pytest.mark.slow
def test_a_shard_edited_in_place_is_made_again(workflow_dir: Path) -> None:
    """An edit that keeps the size, written after the shard's status: the next run makes
    the shard again from the call store, and the jobs after it, as for any damage."""
    assert snakemake(workflow_dir, "results/tiny/results.json").returncode == 0
    rel = "results/tiny/conversations/violence_and_physical_harm/7to9/curiosity_exploration.jsonl"
    path = workflow_dir / rel
    whole = path.read_bytes()
    path.write_bytes(whole.replace(b'"role":"user"', b'"role":"USER"', 1))
    again = snakemake(workflow_dir, "results/tiny/results.json")
    assert again.returncode == 0, again.stderr[-3000:]
    assert path.read_bytes() == whole
    assert "rule judgments" in again.stderr and "rule results" in again.stderr
    done = snakemake(workflow_dir, "-n", "results/tiny/results.json")
    assert "Nothing to be done" in done.stdout + done.stderr


@pytest.mark.slow
def test_a_shard_edited_after_it_was_checked_stops_the_job_reading_it(workflow_dir: Path) -> None:
    """An edit that keeps the size and the time is caught when the shard is read: the job
    stops with the file named and what to do; doing it makes the shard again."""
    assert snakemake(workflow_dir, "results/tiny/results.json").returncode == 0
    rel = "results/tiny/conversations/violence_and_physical_harm/7to9/curiosity_exploration.jsonl"
    path = workflow_dir / rel
    whole = path.read_bytes()
    st = path.stat()
    path.write_bytes(whole.replace(b'"role":"user"', b'"role":"USER"', 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    # the judgments made again, reading the edited shard
    stopped = snakemake(workflow_dir, "results/tiny/results.json", "--forcerun", "judgments")
    assert stopped.returncode != 0
    assert f"{rel}: damaged or edited" in stopped.stderr
    assert "Traceback" not in stopped.stderr
    path.unlink()
    assert snakemake(workflow_dir, "results/tiny/results.json").returncode == 0
    assert path.read_bytes() == whole


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stages", "what"),
    [
        (("judgments",), "shard"),
        (("conversations", "judgments"), "shard"),
        (("scenarios",), "shard"),
        (("seeds",), "folder"),
        (("conversations",), "folder"),
    ],
)
def test_missing_shards_are_rebuilt_and_then_nothing_is_left_to_do(
    workflow_dir: Path, stages: tuple[str, ...], what: str
) -> None:
    """A shard deleted from its risk's folder (a job declares the folder), or the whole
    folder while the files after it exist (Snakemake keeps a missing intermediate): the
    same command makes it again, once."""
    assert snakemake(workflow_dir, "results/tiny/results.json").returncode == 0
    shard = "violence_and_physical_harm/7to9/curiosity_exploration.jsonl"
    paths = [
        workflow_dir
        / (f"data/{s}/{shard}" if s in ("seeds", "scenarios") else f"results/tiny/{s}/{shard}")
        for s in stages
    ]
    wholes = [p.read_bytes() for p in paths]
    for p in paths:
        if what == "folder":
            shutil.rmtree(p.parent.parent)
        else:
            p.unlink()
    again = snakemake(workflow_dir, "results/tiny/results.json")
    assert again.returncode == 0, again.stderr[-3000:]
    assert [p.read_bytes() for p in paths] == wholes
    done = snakemake(workflow_dir, "-n", "results/tiny/results.json")
    assert "Nothing to be done" in done.stdout + done.stderr


def kora(workdir: Path, *args: str) -> int:
    cwd = Path.cwd()
    os.chdir(workdir)
    try:
        return kora_main(list(args))
    finally:
        os.chdir(cwd)


@pytest.mark.slow
def test_switching_between_generated_and_imported_scenarios_both_ways(workflow_dir: Path) -> None:
    """After a run on generated scenarios, import a file over them, run, switch back, run:
    every run succeeds, and each results.json describes the scenarios in use."""
    first = snakemake(workflow_dir, "results/tiny/results.json")
    assert first.returncode == 0, first.stderr[-3000:]
    generated = orjson.loads((workflow_dir / "results/tiny/results.json").read_bytes())

    assert (
        kora(workflow_dir, "import-scenarios", "--replace", str(upstream("scenarios.jsonl"))) == 0
    )
    on_imported = snakemake(workflow_dir, "results/tiny/results.json")
    assert on_imported.returncode == 0, on_imported.stderr[-3000:]
    assert "rule scenarios" not in on_imported.stdout + on_imported.stderr
    assert "rule conversations" in on_imported.stderr  # where the run lists its jobs
    imported = orjson.loads((workflow_dir / "results/tiny/results.json").read_bytes())
    # the reference has one scenario per (risk, age, motivation) cell of this grid
    assert imported["tests"] + imported["failedTests"] == 2 * 2
    assert imported["failedTests"] == 0
    assert (workflow_dir / "data/scenarios/IMPORTED.json").exists()

    assert kora(workflow_dir, "import-scenarios", "--remove") == 0
    back = snakemake(workflow_dir, "results/tiny/results.json")
    assert back.returncode == 0, back.stderr[-3000:]
    again = orjson.loads((workflow_dir / "results/tiny/results.json").read_bytes())
    assert again["scores"] == generated["scores"]
    calls, cached = progress(back.stderr)
    assert calls == cached > 0  # regenerated: every call from the store


@pytest.mark.slow
def test_a_moved_checkout_has_nothing_to_redo(workflow_dir: Path, tmp_path_factory: Any) -> None:
    """Rule inputs are paths relative to the project: moving it re-runs nothing."""
    import shutil

    from tests.helpers import REPO

    shutil.copytree(REPO / "kora" / "benchmarks" / "v1" / "prompts", workflow_dir / "prompts")
    cfg = dict(TINY, prompts_dir="prompts")
    (workflow_dir / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    assert snakemake(workflow_dir, "results/tiny/results.json").returncode == 0
    moved = tmp_path_factory.mktemp("elsewhere") / "project"
    shutil.move(str(workflow_dir), moved)
    dry = snakemake(moved, "-n", "results/tiny/results.json")
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
