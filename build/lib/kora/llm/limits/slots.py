"""Concurrency slots (`max_concurrency`): `n` lock files `<model>.slot<i>` shared by every
process of the run, or `n` slots within the process.

A call holds one slot with a non-blocking `flock` for as long as it is in flight. A
process with calls waiting polls for a free file (from 2 ms, backing off to 50 ms) and
hands its own freed slots straight to its next waiting call. A killed process's locks
vanish with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import random
from collections import deque
from pathlib import Path


class Slots:
    """`n` concurrency slots: lock files shared by every process, or in-process only."""

    def __init__(self, n: int, paths: list[Path] | None) -> None:
        self.n = n
        self.paths = paths
        self.fds: list[int] = []
        self.pid = -1
        self.held: set[int] = set()
        self.waiters: deque[asyncio.Future[int]] = deque()
        self.poller: asyncio.Task[None] | None = None

    def _check_fork(self) -> None:
        if self.paths is not None and self.pid != os.getpid():
            self.fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o644) for p in self.paths]
            self.pid = os.getpid()
            self.held.clear()
            self.waiters.clear()
            self.poller = None

    def _try(self) -> int | None:
        if len(self.held) >= self.n:
            return None
        if self.paths is None:
            i = next(i for i in range(self.n) if i not in self.held)
            self.held.add(i)
            return i
        first = random.randrange(self.n)
        for k in range(self.n):
            i = (first + k) % self.n
            if i in self.held:
                continue
            try:
                fcntl.flock(self.fds[i], fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            self.held.add(i)
            return i
        return None

    def _hand_over(self, i: int) -> bool:
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(i)
                return True
        return False

    async def acquire(self) -> int:
        self._check_fork()
        if not self.waiters:
            i = self._try()
            if i is not None:
                return i
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        if self.paths is not None and (self.poller is None or self.poller.done()):
            self.poller = asyncio.create_task(self._poll())
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(fut.result())
            raise
        finally:
            with contextlib.suppress(ValueError):
                self.waiters.remove(fut)

    def release(self, i: int) -> None:
        if self._hand_over(i):
            return
        self.held.discard(i)
        if self.paths is not None and self.pid == os.getpid():
            fcntl.flock(self.fds[i], fcntl.LOCK_UN)

    async def _poll(self) -> None:
        """Wait for another process to free a slot, on behalf of this process's waiters."""
        delay = 0.002
        while any(not f.done() for f in self.waiters):
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            i = self._try()
            if i is None:
                delay = min(delay * 2, 0.05)
                continue
            delay = 0.002
            if not self._hand_over(i):
                self.release(i)
