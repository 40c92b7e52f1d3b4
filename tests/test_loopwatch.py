"""The bench's look into the broker (bench/broker_hook/, for bench/full_grid.py): its CPU and
its garbage collector's (bench/broker_cpu.py), and with --watch-loop its loop watch
(bench/loopwatch.py): a callback that holds the event loop is reported as a stall, with
where the loop was while it held it."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from bench.broker_cpu import CollectorTime
from bench.loopwatch import LoopWatch
from tests.helpers import copy_workflow

HOOK = Path(__file__).resolve().parents[1] / "bench" / "broker_hook"


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


def test_the_collectors_passes_and_time_are_counted() -> None:
    collected = CollectorTime()
    for generation in (2, 0):
        collected("start", {"generation": generation})
        collected("stop", {"generation": generation})
    assert collected.passes == [1, 0, 1] and collected.seconds >= 0
    assert collected.summary().startswith("2 passes (1 young, 0 middle, 1 full), ")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("watch_loop", ["1", ""])
def test_the_hook_reports_the_brokers_cpu_and_watches_its_loop_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, watch_loop: str
) -> None:
    """The hook's folder on PYTHONPATH (bench/full_grid.py): the broker's log ends with its
    collector's passes and its CPU, and with BENCH_WATCH_LOOP=1 (--watch-loop) the watch's
    summary; any other Python process runs as it would without."""
    from kora.run.broker.dispatch import BROKER_ENV
    from kora.run.broker.server import start_broker

    copy_workflow(tmp_path)
    monkeypatch.delenv(BROKER_ENV, raising=False)  # start_broker sets it
    monkeypatch.chdir(tmp_path)  # the broker runs in the current folder
    monkeypatch.setenv("PYTHONPATH", str(HOOK))
    monkeypatch.setenv("BENCH_WATCH_LOOP", watch_loop)
    broker = start_broker(f"watched-{uuid.uuid4().hex[:8]}", tmp_path / "broker.log")
    assert broker is not None
    broker.stop()
    log = (tmp_path / "broker.log").read_text()
    assert re.search(r"the broker's garbage collector: \d+ passes \(\d+ young, ", log), log
    assert re.search(r"the broker's CPU: [\d.]+ s, [\d.]+ s of it on its event loop's", log)
    assert ("the broker's loop: stalls over 50 ms: " in log) == bool(watch_loop)
    other = [sys.executable, "-c", "import uvloop; print(uvloop.run.__module__)"]
    assert subprocess.run(other, capture_output=True, text=True).stdout == "uvloop\n"
