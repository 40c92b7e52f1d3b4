"""The broker's CPU and its garbage collector's share of it, as its log's last lines.

bench/full_grid.py puts bench/broker_hook/ on PYTHONPATH for every run, which makes the
broker's process (`python -m kora.run.broker.server`) call `install`: the collector's
passes are counted and timed (a `gc.callbacks` timer) from the moment uvloop.run starts,
and once it returns the log says what they took and what the process's CPU was;
full_grid.py reads both from logs/**/broker.log.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class CollectorTime:
    """The passes the collector made in this process and the CPU they took."""

    passes: list[int] = field(default_factory=lambda: [0, 0, 0])
    seconds: float = 0.0
    _started: float = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.passes[info["generation"]] += 1

    def summary(self) -> str:
        young, middle, full = self.passes
        return (
            f"{sum(self.passes)} passes ({young} young, {middle} middle, {full} full), "
            f"{self.seconds:.2f} s of CPU"
        )


def install() -> None:
    """Time the collector through every uvloop.run of this process (the broker runs one),
    and log it and the process's CPU when the run returns."""
    import uvloop

    run = uvloop.run

    def timed_run(main: Coroutine[Any, Any, T], **kwargs: Any) -> T:
        collected = CollectorTime()
        gc.callbacks.append(collected)
        try:
            return run(main, **kwargs)
        finally:
            log = logging.getLogger("kora.run.broker.server")
            log.info("the broker's garbage collector: %s", collected.summary())
            # the loop's own thread is what holds a run below its provider's limit; the
            # rest of the process's CPU is other threads' (aiohttp looks host names up in
            # threads)
            log.info(
                "the broker's CPU: %.1f s, %.1f s of it on its event loop's thread",
                time.process_time(),
                time.thread_time(),
            )

    uvloop.run = timed_run
