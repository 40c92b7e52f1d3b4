"""The calls of one process that wait for a model's request slot (`Turns`): one task per
event loop hands out their slots from the shared rate (kora.llm.limits.rate), and the
process's own sends of the last second say where a late call may still go."""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import deque

from kora.llm.limits.rate import MAX_RATE, RatePolicy, RateState
from kora.llm.limits.state import FileState, MemoryState

Reservation = tuple[float, float, float]  # (seconds to wait, epoch, asked at)

# Late calls go out at most BURST_SHARE times as fast as the rate over any BURST_SPAN
# seconds. Filling a second's room at once (90 requests after a 0.3 s stall of the
# loop), they reached a target's server in bursts of 40-75 in 50 ms, and its one-second
# windows held more than the limit: 0.3-1.1 % of a leaderboard's target requests were
# refused (bench/full_grid.py --targets 4). Rarer since, not gone: requests also bunch
# after this count, where the loop writes them (bench/README.md).
BURST_SPAN = 0.05
BURST_SHARE = 2.0


class Turns:
    """The calls of one process (one event loop) that wait for a model's request slot,
    in the order they asked, served by one task that asks the shared state for each in
    turn.

    Were each waiting call to ask by itself, hundreds of them queued at a high limit
    would each wake and ask again every few tenths of a second: dozens of shared-state
    updates a call. One at a time, each under a lock handed from call to call, a slot
    took a loop iteration to hand out: a busy loop (30-180 ms an iteration while the
    broker wrote a job's files) gave out a few dozen slots a second, and the whole
    grid's requests in flight fell from ~400 to 20-60 with a thousand calls waiting
    and the rate at 300 req/s. The task hands out every slot within the horizon at
    once; it waits only when the next one is further away (or the run is paused)."""

    def __init__(self) -> None:
        self.waiting: deque[
            tuple[
                asyncio.Future[Reservation],
                RatePolicy,
                MemoryState[RateState] | FileState[RateState],
            ]
        ] = deque()
        self.server: asyncio.Task[None] | None = None
        # the requests this process sent in the last second (their slots' calls woke),
        # and the last slot handed out and the rate then: what a late call may fill
        self.sent: deque[float] = deque()
        self.tat = 0.0
        self.rate = MAX_RATE

    def note(self, now: float) -> None:
        """A request sent now; only the last second's are kept."""
        self._forget(now)
        self.sent.append(now)

    def _forget(self, now: float) -> None:
        while self.sent and self.sent[0] <= now - 1.0:
            self.sent.popleft()

    def room(self, now: float) -> bool:
        """Whether one request more now keeps every one-second window, to the last slot
        already handed out, within the rate (the slots late calls missed are the room),
        and the last `BURST_SPAN` seconds within `BURST_SHARE` times their share of it."""
        self._forget(now)
        if self.rate >= MAX_RATE:
            return True
        if len(self.sent) + 1 > self.rate:  # the window ending now
            return False
        burst = max(1, int(BURST_SHARE * BURST_SPAN * self.rate + 1e-9))
        if len(self.sent) >= burst and self.sent[-burst] > now - BURST_SPAN:
            return False
        ahead = max(0.0, self.tat - now)  # slots handed out and not yet used
        since = bisect.bisect_right(self.sent, self.tat - 1.0)
        return len(self.sent) - since + ahead * self.rate + 1 <= self.rate

    def take(
        self, policy: RatePolicy, state: MemoryState[RateState] | FileState[RateState]
    ) -> asyncio.Future[Reservation]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Reservation] = loop.create_future()
        self.waiting.append((fut, policy, state))
        if self.server is None or self.server.done():
            self.server = loop.create_task(self._serve())
        return fut

    async def _serve(self) -> None:
        try:
            while self.waiting:
                fut, policy, state = self.waiting[0]
                if fut.done():  # its call was cancelled while it waited
                    self.waiting.popleft()
                    continue
                now = time.time()

                def take(
                    st: RateState | None, now: float = now, policy: RatePolicy = policy
                ) -> tuple[RateState, tuple[float, bool, float, float, float]]:
                    new, wait, reserved = policy.reserve(st, now)
                    return new, (wait, reserved, new.cuts, new.tat, new.rate)

                try:
                    wait, reserved, epoch, self.tat, self.rate = state.update(take)
                except Exception as exc:  # the state file: the call fails with it
                    self.waiting.popleft()
                    fut.set_exception(exc)
                    continue
                if not reserved:
                    await asyncio.sleep(wait)
                    continue
                self.waiting.popleft()
                fut.set_result((wait, epoch, now))
        finally:
            for fut, _, _ in self.waiting:  # the loop is closing: nobody hands out slots
                if not fut.done():
                    fut.cancel()
            self.waiting.clear()
