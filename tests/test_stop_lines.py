"""The last lines of a stopped run are kora's and say what stopped it: no line of
Snakemake's about a job that failed when a stop ended it (a Ctrl-C, the budget), whichever
process the stop reached first."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.helpers import copy_workflow
from tests.loopback import Servers
from tests.workflows import (
    Server,
    config,
    kora_has_the_last_word,
    loopback_env,
    start_snakemake,
    structured_answer,
)

pytestmark = pytest.mark.slow

TARGET = "results/bot/results.json"


def workspace(tmp_path: Path, url: str, **more: object) -> Path:
    copy_workflow(tmp_path)
    run = config(url, ["bot"], ["judge"])
    run.pop("prompts_dir")
    run["grid"]["seeds_per_task"] = 3
    run["targets"]["gpt-target"] = None  # config.yaml's, which this run does not use
    for m in run["models"].values():
        m.update(price={"input": 3.0, "output": 15.0}, max_tokens=600)
    run.update(more)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    return tmp_path


def job_scripts(workdir: Path) -> Iterator[int]:
    """The processes of the run's jobs that take Ctrl-C (a job's script, or the shell it
    waits as), not the shells that start them, which ignore it."""
    here = workdir.resolve()
    sigint = 1 << (signal.SIGINT - 1)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes()
            cwd = (entry / "cwd").resolve()
            status = (entry / "status").read_text()
        except OSError:
            continue
        caught = next((x for x in status.splitlines() if x.startswith("SigCgt")), "SigCgt: 0")
        if cwd == here and b".snakemake/scripts/" in argv and int(caught.split()[1], 16) & sigint:
            yield int(entry.name)


@pytest.mark.timeout(300)
def test_a_ctrl_c_that_reaches_the_jobs_first_ends_as_a_stop(
    tmp_path: Path, serve: Servers
) -> None:
    """Ctrl-C reaches every process of the run at once, and a job may end on it before
    Snakemake's own process has run its handler: Snakemake then reported the job as
    failed ("Exiting because a job execution failed") and kora said nothing of a stop.
    Here the jobs alone get it, so that they are certain to be first."""
    server = serve(Server, structured=structured_answer, latency=0.15)
    workdir = workspace(tmp_path, server.url)
    log = workdir / "run.log"
    proc = start_snakemake(workdir, TARGET, configfile="run.yaml", env=loopback_env(), log=log)
    assert server.wait_for(lambda s: s.count >= 3, timeout=120), log.read_text()
    stopped = 0
    while not stopped and proc.poll() is None:
        for pid in job_scripts(workdir):
            try:
                os.kill(pid, signal.SIGINT)
                stopped += 1
            except ProcessLookupError:  # ended on its own meanwhile
                pass
        os.sched_yield()
    status = proc.wait(timeout=240)
    out = log.read_text()
    assert stopped, out[-3000:]
    assert status == 128 + signal.SIGINT, out[-4000:]
    assert re.search(r"kora: the run was stopped \(SIGINT\): \d+ of \d+ shards done", out)
    assert "kora: to go on: snakemake --cores 2 results/bot/results.json" in out
    kora_has_the_last_word(out)


@pytest.mark.timeout(300)
def test_a_budget_stop_ends_on_koras_lines(tmp_path: Path, serve: Servers) -> None:
    """A job that stops at the budget says so, and the run's closing lines say what to do:
    Snakemake's report of the job (`RuleException: CalledProcessError ... message: None`,
    "Exiting because a job execution failed") only buried them."""
    server = serve(Server, structured=structured_answer)
    workdir = workspace(tmp_path, server.url, budget={"usd": 0.05})
    log = workdir / "run.log"
    proc = start_snakemake(workdir, TARGET, configfile="run.yaml", env=loopback_env(), log=log)
    status = proc.wait(timeout=240)
    out = log.read_text()
    assert status == 1, out[-4000:]
    assert re.search(r"scenarios job \(logs/.+\.log\) stopped: the budget is reached", out)
    assert "kora: the run stopped at its budget" in out
    assert re.search(r"^kora: .*raise the budget: snakemake .*--config 'budget=", out, re.M)
    kora_has_the_last_word(out)


INTERRUPTED_IMPORT = """import signal, sys
from kora.run.broker.dispatch import run


class Interrupted:
    def __set_name__(self, owner, name):
        signal.raise_signal(getattr(signal, sys.argv[1]))


class Job:
    @property
    def params(self):
        # what reading Snakemake's job object may do: import snakemake.io, whose classes'
        # __set_name__ wraps whatever is raised in it in a RuntimeError
        class QueueInfo:
            items = Interrupted()

    input = output = log = config = {}


run("seeds", Job())
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_stop_during_the_jobs_imports_ends_it_as_a_stop(tmp_path: Path, sig: str) -> None:
    """A Ctrl-C that reaches a job while Snakemake's job object is still loading its
    modules came out of the import as a RuntimeError: the job ended with a traceback and
    Snakemake's "a job execution failed" instead of the run's stop (CI, stop 64)."""
    import subprocess
    import sys

    from kora.run.transport.protocol import stopping_path
    from tests.helpers import REPO

    (tmp_path / "script.py").write_text(INTERRUPTED_IMPORT)
    env = dict(os.environ, PYTHONPATH=str(REPO), KORA_RUN_ID="r1")
    env.pop("KORA_BROKER", None)
    done = subprocess.run(
        [sys.executable, "script.py", sig],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 128 + signal.SIGINT, done.stderr
    assert "Traceback" not in done.stderr
    # a Ctrl-C reaches the whole run and says it is stopping; a SIGTERM may be meant for
    # this job alone (a cluster's time limit)
    assert stopping_path(tmp_path, "r1").exists() == (sig == "SIGINT")
