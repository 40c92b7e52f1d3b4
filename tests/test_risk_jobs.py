"""One Snakemake job per risk (and target) for each shard stage, each cell run as a job of
its own was (kora.run.workflow.risk_jobs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
import yaml

from kora.run.transport.jobspec import JobSpec
from kora.run.workflow.pipeline import Pipeline
from kora.run.workflow.risk_jobs import split
from tests.helpers import copy_workflow
from tests.workflows import TINY, job_stats, snakemake

RISKS = ["violence_and_physical_harm", "grooming_and_manipulation"]
AGES = ["7to9", "13to17"]
MOTIVATIONS = ["curiosity_exploration", "emotional_distress_anxiety"]


@pytest.fixture
def grid(tmp_path: Path) -> Path:
    copy_workflow(tmp_path)
    cfg = {
        **TINY,
        "grid": {"risks": RISKS, "age_ranges": AGES, "motivations": MOTIVATIONS,
                 "seeds_per_task": 1},
    }  # fmt: skip
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path


class _Wc(SimpleNamespace):
    def items(self) -> Any:
        return vars(self).items()


def _rule_job(p: Pipeline, stage: str, wc: dict[str, str]) -> JobSpec:
    """The spec a rule's script builds from what Snakemake hands it for these wildcards."""
    w = _Wc(**wc)
    params = {k: v(w) if callable(v) else v for k, v in p.rule_params(stage).items()}
    output = {"shards": p.rule_output(stage).format(**wc)}
    logs = [p.rule_log(stage).format(**wc)]
    return JobSpec.of(stage, p.rule_input(stage)(w), output, params, logs, p.raw_config)


@pytest.mark.timeout(120)
def test_a_run_has_one_job_per_risk_for_each_stage(grid: Path) -> None:
    """A 2 x 2 x 2 grid: 8 cells, 2 jobs a stage (one job a cell was 8)."""
    done = snakemake(grid, "-n", "results/tiny/results.json")
    assert done.returncode == 0, done.stderr[-3000:]
    stats = job_stats(done.stdout + done.stderr)
    assert {k: stats[k] for k in ("seeds", "scenarios", "conversations", "judgments")} == {
        "seeds": 2, "scenarios": 2, "conversations": 2, "judgments": 2}  # fmt: skip
    assert stats["total"] == 9


@pytest.mark.parametrize("stage", ["seeds", "scenarios", "conversations", "judgments"])
def test_each_cell_of_a_job_gets_the_spec_a_job_of_its_own_had(grid: Path, stage: str) -> None:
    p = Pipeline.load([grid / "tiny.yaml"], grid)
    wc = {"risk": RISKS[1]} | (
        {"target": "tiny"} if stage in ("conversations", "judgments") else {}
    )
    cells = split(_rule_job(p, stage, wc))
    own = [p.job_spec(stage, {**wc, "age": a, "motivation": m}) for a in AGES for m in MOTIVATIONS]
    assert len(cells) == len(own) == 4
    for cell, alone in zip(cells, own, strict=True):
        # the plan's spec leaves the retry token out (kora.run.workflow.pipeline.Pipeline.job_spec)
        assert cell.params.pop("retry") == ""
        alone.params.pop("retry")
        assert orjson.loads(orjson.dumps(cell.as_json())) == orjson.loads(
            orjson.dumps(alone.as_json())
        )


def test_every_stage_runs_in_the_broker_and_a_script_starts_without_loading_one() -> None:
    """The scripts' list of brokered rules is the stages' one list (a new stage would
    otherwise run its calls outside the broker), and reading it loads no stage: a job's
    script starts in a few hundredths of a second (kora.run.broker.dispatch)."""
    code = (
        "import sys; from kora.run.broker import dispatch; "
        "print([m for m in sys.modules if m.startswith(('kora.run.stages.', 'pydantic'))])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr
    from kora.run.broker.dispatch import ORDER
    from kora.run.stages.registry import STAGES

    assert tuple(STAGES) == ORDER
    assert all(stage.name == name for name, stage in STAGES.items())


@pytest.mark.timeout(300)
def test_a_failed_cell_reruns_its_job_and_pays_only_for_itself(grid: Path) -> None:
    """A damaged shard renews its cell's retry token: the next run re-runs that risk's job
    (its other cells from the call store) and the jobs after it, and nothing else."""
    first = snakemake(grid, "results/tiny/results.json")
    assert first.returncode == 0, first.stderr[-3000:]
    damaged = grid / f"data/scenarios/{RISKS[0]}/7to9/curiosity_exploration.jsonl"
    damaged.write_text(damaged.read_text()[:-10])
    again = snakemake(grid, "-n", "results/tiny/results.json")
    assert again.returncode == 0, again.stderr[-3000:]
    stats = job_stats(again.stdout + again.stderr)
    assert stats.get("seeds", 0) == 0
    assert stats["scenarios"] == 1 and stats["conversations"] == 1 and stats["judgments"] == 1
