"""The request rate of one model: pure maths on a `RateState`, kept in a shared file by
`kora.llm.limits.state` (all times wall-clock seconds).

- A known limit (`requests_per_minute`, or the one the server's headers state) is paced
  at `headroom` of itself: requests reach a server a few ms early or late, and one that
  came late at the limit itself would share a window with the next ones, one too many.
- A configured rate (`requests_per_minute`) is a next-slot time (GCRA): a call takes the
  next slot, then sleeps until it, at most `horizon` ahead (one that would wait longer
  comes back later, so a change of rate takes effect at once). The only burst credit is
  for slots that passed unused in the last `catch_up` seconds while the process could not
  take them (a pause of its event loop): nothing after an idle spell or at the start. A
  request sent in such a slot, or by a call that woke late for its own, goes only while
  no one-second window then holds more than the rate, and at most twice as fast as the
  rate (kora.llm.limits.turns).
- Without a configured limit the rate adapts (AIMD): it starts at `start_rate` and
  doubles every second while calls queue behind it (slow start). A 429 multiplies it by
  `decrease`, or by the share of calls accepted since the previous cut when that is
  lower, so a deep overshoot is undone in one step. A 429 counts only against the rate
  its call was granted under (`epoch`, the count of cuts then): the rest of a burst
  already sent is what the cut answered, however late its 429s come back. It then
  grows back by `growth` per second while calls queue, up to the configured limit if
  there is one (under a configured limit a 429 is mostly timing jitter: the cut is
  milder, `decrease_configured`, whatever the share refused). A Retry-After of
  `long_pause` seconds or more pauses every process of the run until then.
- The provider's rate-limit headers (`observe`) cap the rate at the limit the server
  states (and end the slow start there: the limit is known), and pause new calls until
  the reset when it says none remain.
"""

from __future__ import annotations

import math
import random
import struct
from dataclasses import dataclass

from kora.llm.headers import Reading

MAX_RATE = 1e6  # req/s; "no limit" in practice


@dataclass(frozen=True)
class RateTuning:
    start_rate: float = 8.0  # req/s a model without a configured limit starts from
    slow_start_growth: float = 1.0  # +100 %/s while calls queue, until the first 429
    growth: float = 0.05  # +5 %/s while calls queue, after a 429
    decrease: float = 0.85  # on a 429 the rate is multiplied by this, or by the share of
    # calls accepted since the last cut if lower (a deep overshoot is undone at once) ...
    hold: float = 0.3  # ... at most once per (slots already given out + hold) seconds
    decrease_configured: float = 0.95  # milder under a configured limit: a 429 there is
    # mostly timing jitter at the limit (or another user of the same key)
    headroom: float = 0.98  # at a limit the config or the server states, pace at this share
    # of it: paced at the limit itself, a request that reaches the server a few ms late
    # shares a one-second window with the next second's, one too many (arrivals jitter)
    min_rate: float = 1 / 60  # never below one call a minute
    horizon: float = 0.3  # seconds: a call reserves a slot at most this far ahead
    catch_up: float = 0.3  # seconds: slots this recent that passed unused are given out
    long_pause: float = 5.0  # a Retry-After this long pauses every process
    idle_reset: float = 600.0  # seconds without calls after which the learnt rate is dropped
    max_hold: float = 60.0  # the longest a server's reset time may hold calls back


@dataclass
class RateState:
    """The shared part of a rate limit (all times wall-clock seconds)."""

    tat: float = 0.0  # next free slot
    rate: float = MAX_RATE  # current allowed rate, req/s
    pause_until: float = 0.0
    hold_until: float = 0.0  # no growth and no further cut before this
    last_growth: float = 0.0
    last_seen: float = 0.0
    slow_start: float = 1.0  # 1.0 until the first 429
    cuts: float = 0.0
    granted: float = 0.0  # slots given out since the last cut
    refused: float = 0.0  # 429s since the last cut
    server_rate: float = 0.0  # req/s the server's headers state (0: not stated)

    _FORMAT = struct.Struct("<d11d")  # version, fields
    _VERSION = 3.0

    def pack(self) -> bytes:
        return self._FORMAT.pack(
            self._VERSION,
            self.tat,
            self.rate,
            self.pause_until,
            self.hold_until,
            self.last_growth,
            self.last_seen,
            self.slow_start,
            self.cuts,
            self.granted,
            self.refused,
            self.server_rate,
        )

    @classmethod
    def unpack(cls, raw: bytes) -> RateState | None:
        if len(raw) < cls._FORMAT.size:
            return None
        version, *fields = cls._FORMAT.unpack(raw[: cls._FORMAT.size])
        if version != cls._VERSION or not all(math.isfinite(f) for f in fields):
            return None
        if fields[1] <= 0:
            return None
        return cls(*fields)


class RatePolicy:
    """How one model's rate is kept: a ceiling (configured limit) and whether to adapt."""

    def __init__(self, requests_per_minute: float | None, adaptive: bool, tuning: RateTuning):
        self.ceiling = requests_per_minute / 60.0 if requests_per_minute else MAX_RATE
        self.configured = requests_per_minute is not None
        # how late a call may be for its slot and still count as on time
        self.late_tolerance = max(0.01, 0.5 / self.ceiling)
        self.adaptive = adaptive
        self.tuning = tuning

    def fresh(self, now: float) -> RateState:
        if self.configured or not self.adaptive:
            return RateState(rate=self.ceiling, last_growth=now, last_seen=now, slow_start=0.0)
        return RateState(rate=self.tuning.start_rate, last_growth=now, last_seen=now)

    def _ceiling(self, st: RateState) -> float:
        """The rate to pace at: the configured limit, or the server's when it states a
        lower one, less the headroom."""
        limit = min(self.ceiling, st.server_rate) if st.server_rate > 0 else self.ceiling
        return limit * self.tuning.headroom if limit < MAX_RATE else limit

    def reserve(self, st: RateState | None, now: float) -> tuple[RateState, float, bool]:
        """Take the next slot: (new state, seconds to wait, reserved?).

        Not reserved means the next slot is more than `horizon` away: wait, then ask again.
        A wait below 0 is a slot that passed unused that long ago (`catch_up`): a request
        sent in it now is late, and goes only where the server's window has room
        (kora.llm.limits.turns).
        """
        t = self.tuning
        if st is None or now - st.last_seen > t.idle_reset or now < st.last_seen - 3600:
            st = self.fresh(now)
        st.last_seen = now
        ceiling = self._ceiling(st)
        if not self.adaptive or st.rate > ceiling:
            st.rate = ceiling
        # Slots that passed unused in the last `catch_up` seconds (the process was busy:
        # a garbage collection, a job writing its files) are given out now: the server
        # saw no request in them, so within any of its windows the count stays within
        # the rate. Older ones are gone (an idle client earns no burst).
        earliest = st.tat if now - st.tat <= t.catch_up else now
        start = max(earliest, st.pause_until)
        wait = start - now  # below 0: a slot that passed unused that long ago
        if wait > t.horizon:
            return st, wait - t.horizon * random.uniform(0.3, 0.9), False
        if self.adaptive and st.rate < ceiling and wait > 0 and now >= st.hold_until:
            # calls are queueing behind the limiter: probe upwards
            g = t.slow_start_growth if st.slow_start else t.growth
            dt = min(max(0.0, now - st.last_growth), 10.0)
            st.rate = min(ceiling, st.rate * (1.0 + g) ** dt)
        st.last_growth = now
        st.tat = start + (1.0 / st.rate if st.rate < MAX_RATE else 0.0)
        st.granted += 1
        return st, wait, True

    def rate_limited(
        self,
        st: RateState | None,
        now: float,
        retry_after: float | None,
        *,
        cut: bool = True,
        epoch: float | None = None,
    ) -> tuple[RateState, bool]:
        """A 429 came back: cut the rate (once per hold) and honour a long Retry-After.

        `cut=False`: the server said another bucket (tokens) ran out, not this one.
        `epoch`: the state's `cuts` when the refused call was granted its slot (None: not
        known, taken as the current rate's). Granted before the last cut, it was sent at
        the rate that cut already answered: counting it again would size the next cut by
        the old rate's refusals (the whole grid's rate fell from 300 to 80-90 req/s so).
        """
        t = self.tuning
        if st is None:
            st = self.fresh(now)
        did_cut = False
        if epoch is not None and epoch < st.cuts:
            cut = False
        if cut:
            st.refused += 1
        if cut and now >= st.hold_until:
            # a limit the config or the server's headers state: the rate never passed it,
            # so a 429 at it is timing jitter (a burst after a pause), not an overshoot to
            # undo; sized by the share refused, bursts of a busy loop cut a run at 300
            # req/s to 130-185 req/s, 25 s from its limit again (bench/full_grid.py)
            known = self.configured or st.server_rate > 0
            accepted = 1.0 - st.refused / st.granted if st.granted >= 8 else 1.0
            factor = t.decrease_configured if known else min(t.decrease, max(0.3, accepted))
            st.rate = max(t.min_rate, min(st.rate, self._ceiling(st)) * factor)
            st.granted = st.refused = 0.0
            st.slow_start = 0.0
            st.hold_until = max(now, st.tat) + t.hold
            st.last_growth = st.hold_until
            st.cuts += 1
            did_cut = True
        if retry_after is not None and retry_after >= t.long_pause:
            st.pause_until = max(st.pause_until, now + min(retry_after, 600.0))
        return st, did_cut

    def observe(self, st: RateState | None, reading: Reading, now: float) -> RateState:
        """The server's requests bucket: its limit caps the rate; none remaining holds
        every call until one request has refilled.

        Providers refill continuously and `reset` is when the bucket is full again, so
        holding until the reset would stop a client that runs at the limit (and often
        reads `remaining: 0`) for up to a whole window each time; the reset only
        counts when no limit says how fast the bucket refills, or when it comes sooner.
        """
        if st is None:
            st = self.fresh(now)
        if reading.limit is not None and reading.limit > 0:
            st.server_rate = reading.limit / 60.0
            if st.slow_start:  # no 429 yet: no need to probe for a limit now stated
                st.rate = self._ceiling(st)
        if reading.remaining is not None and reading.remaining < 1:
            until = now + self.tuning.max_hold
            if reading.limit is not None and reading.limit > 0:
                until = min(until, now + (1.0 - reading.remaining) * 60.0 / reading.limit)
            if reading.reset is not None:
                until = min(until, reading.reset)
            elif reading.limit is None:
                return st
            st.pause_until = max(st.pause_until, until)
        return st
