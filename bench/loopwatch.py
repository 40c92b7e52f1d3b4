"""Where the broker's event loop stops: its stalls, how long, and what it ran meanwhile.

The broker's one event loop carries every call of a run; while one callback holds it, no
call goes out, and the requests whose slots passed meanwhile leave together when it lets
go (a burst a provider may refuse). A profile sums CPU and cannot tell one 400 ms stop
from a hundred short steps, so this watch measures the stops themselves: a task on the
loop beats every few milliseconds and notes each beat that comes more than `threshold`
after the one before, with how the loop's thread spent the gap as Linux counts it at the
two beats (on a CPU, waiting for one, or asleep in the kernel, as a slow file system
makes it); a thread of its own samples the loop thread's stack while a beat is overdue.
Both ends of the count are read by the loop's thread at its beats: read from the watching
thread, which only sees a stall once it is `threshold` old, the count missed that first
part of every stall and reported it as sleep (bench/README.md, "The loop watch's sleep").
`python bench/full_grid.py --watch-loop` turns it on: bench/broker_hook/ on PYTHONPATH
makes the broker's process (`python -m kora.run.broker.server`) call `install`, which
watches the loop uvloop.run runs; the summary goes to the broker's log.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")


def _open_schedstat(tid: int) -> int | None:
    """The thread's scheduler counts, kept open to be read again at every beat (Linux)."""
    try:
        return os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY)
    except OSError:
        return None


def _schedstat(fd: int | None) -> tuple[float, float] | None:
    """Seconds the thread has run on a CPU and waited in the run queue, so far."""
    if fd is None:
        return None
    try:
        on_cpu, queued, _ = os.pread(fd, 128, 0).split()
    except (OSError, ValueError):
        return None
    return int(on_cpu) / 1e9, int(queued) / 1e9


def where(frame: FrameType | None, depth: int = 6) -> str:
    """The innermost `depth` frames of a stack, innermost first (file:line function)."""
    parts: list[str] = []
    while frame is not None and len(parts) < depth:
        code = frame.f_code
        parts.append(f"{Path(code.co_filename).name}:{frame.f_lineno}:{code.co_name}")
        frame = frame.f_back
    return " < ".join(parts)


@dataclass
class LoopWatch:
    """Stalls of one event loop longer than `threshold` seconds, sampled every `period`."""

    threshold: float = 0.05
    period: float = 0.01
    beat: float = 0.005
    stalls: list[float] = field(default_factory=list)
    samples: Counter[str] = field(default_factory=Counter)
    on_cpu: float = 0.0
    queued: float = 0.0
    _last: float = field(default_factory=time.monotonic)
    _ident: int = 0
    _done: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> asyncio.Task[None]:
        """Watch the running loop until `stop`; the heartbeat's task."""
        self._ident = threading.get_ident()
        self._last = time.monotonic()
        threading.Thread(target=self._sample, name="loop-watch", daemon=True).start()
        return asyncio.get_running_loop().create_task(self._heartbeat())

    def stop(self) -> None:
        self._done.set()

    async def _heartbeat(self) -> None:
        fd = _open_schedstat(threading.get_native_id())  # the loop's own thread
        try:
            before, sched0 = time.monotonic(), _schedstat(fd)
            while not self._done.is_set():
                self._last = before
                await asyncio.sleep(self.beat)
                now, sched1 = time.monotonic(), _schedstat(fd)
                if now - before > self.threshold:
                    with self._lock:
                        self.stalls.append(now - before)
                        if sched0 is not None and sched1 is not None:
                            self.on_cpu += sched1[0] - sched0[0]
                            self.queued += sched1[1] - sched0[1]
                before, sched0 = now, sched1
        finally:
            self.stop()  # cancelled with the loop's other tasks: nothing beats any more
            if fd is not None:
                os.close(fd)

    def _sample(self) -> None:
        while not self._done.wait(self.period):
            if time.monotonic() - self._last > self.threshold:
                frame = sys._current_frames().get(self._ident)
                if frame is not None:
                    with self._lock:
                        self.samples[where(frame)] += 1

    def summary(self, top: int = 5) -> list[str]:
        """Lines for the log: the stalls, how the thread spent them, where it was."""
        with self._lock:
            stalls, samples = list(self.stalls), Counter(self.samples)
        total = sum(stalls)
        lines = [
            f"stalls over {self.threshold * 1000:.0f} ms: {len(stalls)}, {total:.1f} s in all, "
            f"the longest {max(stalls, default=0.0):.2f} s; in them on a CPU {self.on_cpu:.1f} s, "
            f"waiting for one {self.queued:.1f} s, "
            f"asleep in the kernel {max(0.0, total - self.on_cpu - self.queued):.1f} s"
        ]
        n = sum(samples.values())
        for stack, k in samples.most_common(top):
            lines.append(f"stalled in ({k / n:.0%} of samples): {stack}")
        return lines


async def watched(main: Coroutine[Any, Any, T], watch: LoopWatch) -> T:
    """`main` on a watched loop; the watch's summary in the log once it is done."""
    watch.start()
    try:
        return await main
    finally:
        watch.stop()
        for line in watch.summary():
            logging.getLogger("kora.run.broker.server").info("the broker's loop: %s", line)


def install() -> None:
    """Watch the loop of every uvloop.run of this process (the broker runs one)."""
    import uvloop

    run = uvloop.run

    def watched_run(main: Coroutine[Any, Any, T], **kwargs: Any) -> T:
        return run(watched(main, LoopWatch()), **kwargs)

    uvloop.run = watched_run
