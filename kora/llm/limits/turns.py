"""The calls of one process that wait for a model's request slot (`Turns`): one task per
event loop hands out their slots from the shared rate (kora.llm.limits.rate), and the
process's own sends of the last second say where a call may still go.

A request counts as sent when its transport writes it (`wrote`, from aiohttp's trace in
kora.llm.wire.aio), not when its slot came: between the two the call's task is handed to the
event loop again, and a busy loop wrote 10 % of a leaderboard's requests 19 ms or more
after their slots, 1 % 170 ms or more (bench/README.md). Written together after such a
pause, they filled a target's one-second window past its limit. Until it is written, a
request let go holds a place in every window (`pending`)."""

from __future__ import annotations

import asyncio
import bisect
import math
import time
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass

from kora.llm.limits.rate import MAX_RATE, RatePolicy, RateState
from kora.llm.limits.state import FileState, MemoryState

Reservation = tuple[float, float, float]  # (seconds to wait, epoch, asked at)

# Late calls go out at most BURST_SHARE times as fast as the rate over any BURST_SPAN
# seconds; one past it waits its turn (`spread`), keeping its slot. Filling a second's
# room at once (90 requests after a 0.3 s stall of the loop), they reached a target's
# server in bursts of 40-75 in 50 ms, and its one-second windows held more than the
# limit: 0.3-1.1 % of a leaderboard's target requests were refused (bench/full_grid.py
# --targets 4). With 30 at once in each 50 ms, a server that stamps a burst's requests
# over the next ms still counted a few of them in the next second: 3-5 refusals at a
# target in two runs of three, a second after the burst (bench/README.md).
BURST_SPAN = 0.01
BURST_SHARE = 2.0
# Late calls keep this long a window within the rate, the paced schedule's (1 / headroom):
# one second let them fill a window to a 40 req/s limit itself (39.2 rounded up)
LATE_WINDOW = 1.02


@dataclass(eq=False)
class Sending:
    """A request its limiter let go that its transport has not written yet."""

    turns: Turns
    done: bool = False

    def end(self) -> None:
        if not self.done:
            self.done = True
            self.turns.pending -= 1


# the current call's request, from its limiter to its transport (a task made for the
# exchange copies it, as it copies every context variable)
_SENDING: ContextVar[Sending | None] = ContextVar("kora_sending", default=None)


def wrote(now: float | None = None) -> None:
    """The current call's request was written now (a transport that reports its writes:
    its call was let go with `traced`); once a request, later writes (a redirect's) and
    calls without a limiter change nothing."""
    sending = _SENDING.get()
    if sending is not None and not sending.done:
        sending.end()
        sending.turns.note(time.time() if now is None else now)


def settled() -> None:
    """The current call's attempt is over: a request never written leaves its place."""
    sending = _SENDING.get()
    if sending is not None:
        sending.end()
        _SENDING.set(None)


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
        # the requests let go and not yet written
        self.pending = 0

    def let_go(self, now: float, *, traced: bool) -> None:
        """A call's request goes: counted now, or (`traced`: its transport says when it
        writes it, `wrote`) held as pending until then."""
        if traced:
            self.pending += 1
            _SENDING.set(Sending(self))
        else:
            self.note(now)
            _SENDING.set(None)

    def note(self, now: float) -> None:
        """A request sent now; only the last `LATE_WINDOW` seconds' are kept."""
        self._forget(now)
        self.sent.append(now)

    def _forget(self, now: float) -> None:
        while self.sent and self.sent[0] <= now - LATE_WINDOW:
            self.sent.popleft()

    def _last_second(self, now: float) -> int:
        """The requests sent in the one second ending now."""
        return len(self.sent) - bisect.bisect_right(self.sent, now - 1.0)

    def room(self, now: float, *, late: bool = True) -> bool:
        """Whether one request more now, with those let go and not yet written, keeps
        the one-second window ending now within the rate (paced at `headroom` of the
        server's limit: what is left of it is for the server's own timing, which stamps
        a burst of requests over the next few ms). A `late` call (its slot passed unused,
        or it woke late for it) keeps the last `LATE_WINDOW` seconds, and every window to
        the last slot handed out, within the rate (the slots it missed are the room), the last
        `BURST_SPAN` seconds within `BURST_SHARE` times their share of it."""
        self._forget(now)
        if self.rate >= MAX_RATE:
            return True
        # a second paced at 9.8 req/s holds 10 slots, at 0.98 one: a window's count is
        # held to the rate rounded up (to the rate itself, no call ever went)
        most = math.ceil(self.rate - 1e-9)
        # the window ending now: a late call's is LATE_WINDOW long, all that `sent` keeps
        window = len(self.sent) if late else self._last_second(now)
        if window + self.pending + 1 > most:
            return False
        if not late:
            return True
        if self.spread(now) > 0:
            return False
        ahead = max(0.0, self.tat - now)  # slots handed out and not yet used
        since = bisect.bisect_right(self.sent, self.tat - 1.0)
        return len(self.sent) - since + self.pending + ahead * self.rate + 1 <= most

    def spread(self, now: float) -> float:
        """How long a late call waits for its turn in the burst: `BURST_SPAN` seconds
        hold at most `BURST_SHARE` times their share of the rate (0: it may go now)."""
        burst = max(1, int(BURST_SHARE * BURST_SPAN * self.rate + 1e-9))
        if len(self.sent) < burst:
            return 0.0
        return max(0.0, self.sent[-burst] + BURST_SPAN - now)

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
