"""The broker's loop watch (bench/loopwatch.py, for bench/full_grid.py --watch-loop): a callback
that holds the event loop is reported as a stall, with where the loop was while it held it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from bench.loopwatch import LoopWatch
from tests.helpers import copy_workflow

HOOK = Path(__file__).resolve().parents[1] / "bench" / "loopwatch_hook"


def _hold_the_loop_until_seen(watch: LoopWatch, pause: float) -> None:
    # blocks the loop until the watch has sampled it here, asleep `pause` seconds at a
    # time (as a slow file system call would) or, with none, on a CPU throughout: waits
    # on the watch's own record, not on a length of time
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with watch._lock:
            if any("_hold_the_loop_until_seen" in s for s in watch.samples):
                return
        if pause:
            time.sleep(pause)
    raise AssertionError("the watch never sampled the held loop")


async def _run(watch: LoopWatch, pause: float = 0.001) -> None:
    watch.start()
    await asyncio.sleep(0)  # the heartbeat beats once
    before = len(watch.stalls)
    _hold_the_loop_until_seen(watch, pause)
    # the stall is counted when the loop beats again
    deadline = time.monotonic() + 60
    while len(watch.stalls) == before and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    watch.stop()


def test_a_held_loop_is_reported_as_a_stall_with_where_it_was() -> None:
    watch = LoopWatch(threshold=0.02, period=0.005, beat=0.002)
    asyncio.run(_run(watch))
    assert watch.stalls and max(watch.stalls) >= 0.02
    lines = watch.summary()
    assert lines[0].startswith("stalls over 20 ms: ")
    # the stack names the function that held the loop, innermost frames first
    assert any("_hold_the_loop_until_seen" in line for line in lines[1:])
    assert "tests/" not in lines[1] and "test_loopwatch.py:" in lines[1]


@pytest.mark.skipif(
    not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat"),
    reason="Linux's scheduler counts",
)
def test_a_loop_held_on_a_cpu_is_not_reported_asleep() -> None:
    """The whole stall is counted, its first `threshold` too: read from the watching
    thread once the stall was seen, that part went uncounted and showed as sleep."""
    watch = LoopWatch(threshold=0.1, period=0.005, beat=0.002)
    asyncio.run(_run(watch, pause=0))
    assert max(watch.stalls) >= 0.1
    asleep = sum(watch.stalls) - watch.on_cpu - watch.queued
    # a spin is on a CPU or waiting for one; the rest is the loop's idle moment before it
    # and the watch's own turns at the interpreter
    assert asleep < watch.threshold / 2, watch.summary()


@pytest.mark.timeout(120)
def test_the_hook_watches_the_brokers_loop_and_no_other_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook's folder on PYTHONPATH (bench/full_grid.py --watch-loop): the broker's log
    ends with the watch's summary, and any other Python process runs as it would without."""
    from kora.run.broker.dispatch import BROKER_ENV
    from kora.run.broker.server import start_broker

    copy_workflow(tmp_path)
    monkeypatch.delenv(BROKER_ENV, raising=False)  # start_broker sets it
    monkeypatch.chdir(tmp_path)  # the broker runs in the current folder
    monkeypatch.setenv("PYTHONPATH", str(HOOK))
    broker = start_broker(f"watched-{uuid.uuid4().hex[:8]}", tmp_path / "broker.log")
    assert broker is not None
    broker.stop()
    assert "the broker's loop: stalls over 50 ms: " in (tmp_path / "broker.log").read_text()
    other = [sys.executable, "-c", "import uvloop; print(uvloop.run.__module__)"]
    assert subprocess.run(other, capture_output=True, text=True).stdout == "uvloop\n"
