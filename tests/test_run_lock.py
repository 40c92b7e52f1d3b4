"""Issue 25, item 8: two runs on one checkout never pay for the same calls twice.

A run holds its call store's lock (`<cache_dir>.lock`, kora.run.runlock) from `onstart`
to its end; a second run, even with Snakemake's `--nolock`, refuses to start and names
the process that holds the store. The kernel drops the lock with its process, so a run
killed with -9 leaves no stale lock behind."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kora.run.runlock import StoreBusy, hold, lock_path
from tests.helpers import copy_workflow
from tests.workflows import TINY, snakemake


@pytest.mark.timeout(30)
def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path) -> None:
    store = tmp_path / ".kora" / "cache"
    first = hold(store)
    with pytest.raises(StoreBusy) as info:
        hold(store)
    assert f"pid {os.getpid()}" in str(info.value) and str(store) in str(info.value)
    first.release()
    hold(store).release()  # free again once released


@pytest.mark.timeout(30)
def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    store = tmp_path / "cache"
    code = (
        "import sys; from kora.run.runlock import hold; lock = hold(sys.argv[1]); "
        "print('held', flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(store)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    with pytest.raises(StoreBusy, match=f"pid {proc.pid}"):
        hold(store)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    hold(store).release()
    assert lock_path(store).exists()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_second_run_with_nolock_refuses_to_start_naming_the_first(tmp_path: Path) -> None:
    copy_workflow(tmp_path)
    cfg: dict[str, Any] = copy.deepcopy(TINY)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    running = hold(tmp_path / ".kora" / "cache", "the first run")  # as a run's onstart does
    try:
        env = dict(os.environ, KORA_NO_BROKER="1")
        second = snakemake(
            tmp_path, "--nolock", "results/tiny/results.json", cores=1, env=env, timeout=120
        )
    finally:
        running.release()
    log = second.stdout + second.stderr
    assert second.returncode != 0, log[-3000:]
    assert "another run is using the call store" in log, log[-3000:]
    assert f"the first run, pid {os.getpid()}" in log
    assert not (tmp_path / "data" / "seeds").exists()  # no job ran, nothing was paid


# a process a test starts that looks to the run like a Snakemake alive in its folder
LOOKS_LIKE_SNAKEMAKE = "import sys; print('ready', flush=True); sys.stdin.read()\n"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_second_identical_run_is_refused_in_koras_words_never_told_to_unlock(
    tmp_path: Path,
) -> None:
    """Issue 58: a second `snakemake` asking for the same files as a live run got
    Snakemake's LockException, advising "It can be removed with the --unlock argument"
    while the first run was alive. It gets kora's refusal now, naming the holder: the run
    holding the call store, or, while the first run still builds its jobs (the store not
    held yet), the Snakemake alive in the folder."""
    copy_workflow(tmp_path)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    locks = tmp_path / ".snakemake" / "locks"  # the first run's lock on the files it makes
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("results/tiny/results.json\n")

    def second() -> str:
        done = snakemake(tmp_path, "results/tiny/results.json", cores=1, timeout=150)
        log = done.stdout + done.stderr
        assert done.returncode == 1, log[-3000:]
        for theirs in ("--unlock", "LockException", "Traceback"):
            assert theirs not in log, log[-3000:]
        assert not (tmp_path / "data" / "seeds").exists()  # no job ran
        return " ".join(log.split())

    running = hold(tmp_path / ".kora" / "cache", "the first run")  # as its onstart does
    try:
        said = second()
    finally:
        running.release()
    assert "another run is using the call store" in said, said[-3000:]
    assert f"the first run, pid {os.getpid()}" in said
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "snakemake").write_text(LOOKS_LIKE_SNAKEMAKE)
    building = subprocess.Popen([sys.executable, "bin/snakemake"], cwd=tmp_path,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert building.stdout is not None and building.stdout.readline().strip() == "ready"
        said = second()
    finally:
        building.communicate("")
    assert f"another Snakemake (pid {building.pid}) is running in {tmp_path}" in said, said[-3000:]
