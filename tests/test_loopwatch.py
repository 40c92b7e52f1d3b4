"""The broker's loop watch (kora.run.broker.loopwatch): a callback that holds the event loop is
reported as a stall, with where the loop was while it held it."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from kora.run.broker.loopwatch import LoopWatch, watch_from_env


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


def test_the_watch_is_off_unless_the_run_asks_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KORA_WATCH_LOOP", raising=False)
    assert watch_from_env() is None
    monkeypatch.setenv("KORA_WATCH_LOOP", "1")
    assert isinstance(watch_from_env(), LoopWatch)
