"""The mock workflow on a real single-node Slurm cluster, through profiles/slurm.

tests/slurm/start.sh starts munged, slurmctld and slurmd on loopback in a temp folder;
the tiny mock workflow then runs with `snakemake --profile ...` (the shipped Slurm profile
plus this cluster's partition and status settings), every job an sbatch job, and its
results.json must equal the one from a local run of the same config.

Skipped, with the reason, when Slurm, munge, the executor plugin or root are missing;
with KORA_REQUIRE_SLURM=1 (CI after .ci/slurm-setup.sh) that is a failure instead.
About 2.5 minutes on 2 cores: 5 waves of jobs, each job two Snakemake start-ups.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from tests.helpers import REPO, copy_workflow
from tests.workflows import TINY, snakemake

SLURM_DIR = Path(__file__).resolve().parent / "slurm"
PROGRAMS = ("munged", "munge", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "srun")
TARGET = "results/tiny/results.json"
# sbatch jobs of the tiny grid: its 2 risks x (seeds, scenarios, conversations, judgments);
# results.json is made on the submitting machine (the Snakefile's localrules)
JOBS = 8


def _unavailable(reason: str) -> None:
    if os.environ.get("KORA_REQUIRE_SLURM") == "1":
        pytest.fail(f"KORA_REQUIRE_SLURM=1 but {reason}")
    pytest.skip(reason)


def _why_not_available() -> str | None:
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    if missing:
        return f"Slurm/munge not installed ({', '.join(missing)} missing; see .ci/slurm-setup.sh)"
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm not installed (pip install -e '.[cluster]')"
    if os.geteuid() != 0:
        return "starting a Slurm cluster needs root (slurmd runs the jobs)"
    return None


@pytest.fixture(scope="module")
def slurm_env() -> Iterator[dict[str, str]]:
    """Environment for Slurm client commands talking to a fresh single-node cluster."""
    reason = _why_not_available()
    if reason:
        _unavailable(reason)
    # short path: munged's socket lives there (unix socket paths max out at 107 bytes)
    state = Path(tempfile.mkdtemp(prefix="kora-slurm-", dir="/tmp"))
    try:
        start = subprocess.run(
            ["bash", str(SLURM_DIR / "start.sh"), str(state)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if start.returncode == 3:
            _unavailable(f"cannot start Slurm here: {start.stderr.strip()}")
        assert start.returncode == 0, f"Slurm did not start:\n{start.stderr[-3000:]}"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["SLURM_CONF"] = str(state / "slurm.conf")
        env["PATH"] = f"{state / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        yield env
    finally:
        subprocess.run(["bash", str(SLURM_DIR / "stop.sh"), str(state)], timeout=60, check=False)
        shutil.rmtree(state, ignore_errors=True)


def _workflow(dest: Path) -> Path:
    dest.mkdir()
    copy_workflow(dest)
    (dest / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    return dest


def _test_profile(dest: Path) -> Path:
    """profiles/slurm as shipped, plus what this throwaway cluster needs."""
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    profile["default-resources"] = {
        **profile["default-resources"],
        "slurm_partition": "kora",
        "mem_mb": 500,
        "runtime": 10,
    }
    profile.update(
        {
            # no accounting database here: job states come from slurmctld (MinJobAge=600)
            "slurm-status-command": "squeue",
            "slurm-no-account": True,
            "slurm-init-seconds-before-status-checks": 5,
            "seconds-between-status-checks": 5,
            "latency-wait": 5,
            "slurm-keep-successful-logs": True,
        }
    )
    (dest / "config.yaml").parent.mkdir(parents=True, exist_ok=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(profile))
    return dest


@pytest.mark.slow
def test_mock_workflow_on_slurm_matches_local_run(
    slurm_env: dict[str, str], tmp_path: Path
) -> None:
    local = _workflow(tmp_path / "local")
    run = snakemake(local, TARGET)
    assert run.returncode == 0, run.stderr[-3000:]

    cluster = _workflow(tmp_path / "slurm")
    profile = _test_profile(cluster / "profile")
    run = snakemake(cluster, "--profile", str(profile), TARGET, cores=None, env=slurm_env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-5000:]

    # every job went through sbatch, and Slurm saw each of them complete
    assert len(re.findall(r"has been submitted with SLURM jobid \d+", out)) == JOBS, out[-5000:]
    run_id = re.search(r"SLURM run ID: (\S+)", out)
    assert run_id, out[-3000:]
    states = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--format=%i|%T", "--name", run_id.group(1)],
        env=slurm_env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert states.returncode == 0, states.stderr
    assert [line.split("|")[1] for line in states.stdout.split()] == ["COMPLETED"] * JOBS

    # the same results as the local run: mock answers are deterministic, cache or not
    local_results = orjson.loads((local / TARGET).read_bytes())
    cluster_results = orjson.loads((cluster / TARGET).read_bytes())
    assert cluster_results["scores"] == local_results["scores"]
    assert cluster_results == local_results
    assert cluster_results["tests"] > 0
