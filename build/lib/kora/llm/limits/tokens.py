"""Token limits of one model: pure maths on a `TokenState` (all times wall-clock seconds).

Providers limit tokens per minute besides requests: Anthropic input and output tokens
separately, OpenAI input and output together. Each is a bucket here, kept like the request
rate: a next-free time `tat` (GCRA without burst credit) that a call advances by its
tokens / the rate. Before a call its tokens are not known, so it reserves an estimate
(`Cost`): its input as characters / 4 (`estimate_input_tokens`), and for an output limit
its `max_tokens`, as the providers themselves do (Anthropic reserves max_tokens against
the output limit and corrects at the end; OpenAI counts max_tokens against its tokens
limit). The answer's real token counts then correct the reservation (`settle`), so
over a run the buckets count what the server counted.

A bucket's rate is the configured limit, or the limit the server's rate-limit headers
state when that is lower or nothing is configured. A header that says fewer tokens remain
than a call like the last one needs holds the bucket's calls until enough are back (at the
bucket's rate), or until the server's reset time when no rate is known.
"""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from kora.llm.base import Request
from kora.llm.headers import Bucket, ServerLimits

TokenBucket = Bucket  # one of TOKEN_BUCKETS
TOKEN_BUCKETS: tuple[TokenBucket, ...] = ("input_tokens", "output_tokens", "tokens")
CHARS_PER_TOKEN = 4  # English prose and JSON average about four characters a token


def estimate_input_tokens(chars: int) -> int:
    """A call's input tokens before it is made, from the characters of its prompt."""
    return math.ceil(chars / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Cost:
    """A call's tokens: estimated before it is sent, counted by the server after."""

    input_tokens: int = 0
    output_tokens: int = 0

    def of(self, bucket: TokenBucket) -> float:
        if bucket == "input_tokens":
            return float(self.input_tokens)
        if bucket == "output_tokens":
            return float(self.output_tokens)
        return float(self.input_tokens + self.output_tokens)


@dataclass
class BucketState:
    tat: float = 0.0  # when the tokens given out so far are paid back
    hold_until: float = 0.0  # the server said too few remain until then
    server_per_minute: float = 0.0  # the limit the server's headers state (0: not stated)


@dataclass
class TokenState:
    last_seen: float = 0.0
    buckets: dict[TokenBucket, BucketState] = field(
        default_factory=lambda: {b: BucketState() for b in TOKEN_BUCKETS}
    )

    _FORMAT = struct.Struct("<dd9d")  # version, last_seen, 3 x (tat, hold, server limit)
    _VERSION = 1.0

    def pack(self) -> bytes:
        values = [self._VERSION, self.last_seen]
        for b in TOKEN_BUCKETS:
            s = self.buckets[b]
            values += [s.tat, s.hold_until, s.server_per_minute]
        return self._FORMAT.pack(*values)

    @classmethod
    def unpack(cls, raw: bytes) -> TokenState | None:
        if len(raw) < cls._FORMAT.size:
            return None
        version, last_seen, *rest = cls._FORMAT.unpack(raw[: cls._FORMAT.size])
        if version != cls._VERSION or not all(math.isfinite(f) for f in (last_seen, *rest)):
            return None
        buckets = {b: BucketState(*rest[3 * i : 3 * i + 3]) for i, b in enumerate(TOKEN_BUCKETS)}
        return cls(last_seen=last_seen, buckets=buckets)


class TokenPolicy:
    """How one model's token buckets are kept."""

    def __init__(
        self,
        per_minute: Mapping[TokenBucket, float | None],
        *,
        horizon: float = 0.3,
        idle_reset: float = 600.0,
        max_hold: float = 60.0,
    ) -> None:
        self.configured = {b: v for b, v in per_minute.items() if v}
        self.horizon = horizon
        self.idle_reset = idle_reset
        self.max_hold = max_hold

    def per_second(self, st: TokenState, bucket: TokenBucket) -> float:
        """The bucket's rate: the lower of the configured and the stated limit; 0: none."""
        limits = [
            v for v in (self.configured.get(bucket), st.buckets[bucket].server_per_minute) if v
        ]
        return min(limits) / 60.0 if limits else 0.0

    def reserve(
        self, st: TokenState | None, cost: Cost, now: float
    ) -> tuple[TokenState, float, bool]:
        """Take the tokens of one call: (new state, seconds to wait, reserved?).

        Not reserved means the call could start only more than `horizon` from now: wait,
        then ask again (another call may have given tokens back meanwhile).
        """
        if st is None or now - st.last_seen > self.idle_reset or now < st.last_seen - 3600:
            st = TokenState()
        st.last_seen = now
        rates = {b: self.per_second(st, b) for b in TOKEN_BUCKETS}
        start = now
        for b in TOKEN_BUCKETS:
            s = st.buckets[b]
            start = max(start, s.hold_until, s.tat if rates[b] > 0 else 0.0)
        wait = start - now
        if wait > self.horizon:
            # look again within a second: answers settling their reservations (an output
            # limit reserves max_tokens) may bring the start much closer
            return st, min(wait - self.horizon * random.uniform(0.3, 0.9), 1.0), False
        for b, rate in rates.items():
            if rate > 0:
                s = st.buckets[b]
                s.tat = max(s.tat, start) + cost.of(b) / rate
        return st, wait, True

    def settle(self, st: TokenState | None, reserved: Cost, used: Cost, now: float) -> TokenState:
        """Replace a call's reservation by what it used (a refund or a further debit)."""
        st = st or TokenState(last_seen=now)
        for b in TOKEN_BUCKETS:
            rate = self.per_second(st, b)
            if rate > 0:
                st.buckets[b].tat += (used.of(b) - reserved.of(b)) / rate
        return st

    def observe(
        self, st: TokenState | None, limits: ServerLimits, cost: Cost, now: float
    ) -> tuple[TokenState, bool]:
        """The server's token buckets as of an answer to a call of `cost`: (new state,
        whether one of them had too few tokens left for such a call)."""
        st = st or TokenState(last_seen=now)
        short = False
        for b in TOKEN_BUCKETS:
            reading = limits.get(b)
            if reading is None:
                continue
            s = st.buckets[b]
            if reading.limit is not None and reading.limit > 0:
                s.server_per_minute = reading.limit
            need = cost.of(b)
            if reading.remaining is None or reading.remaining >= max(need, 1.0):
                continue
            short = True
            rate = self.per_second(st, b)
            if rate > 0:
                until = now + (need - reading.remaining) / rate
                if reading.reset is not None:
                    until = min(until, reading.reset)
            elif reading.reset is not None:
                until = reading.reset
            else:
                continue
            s.hold_until = max(s.hold_until, min(until, now + self.max_hold))
        return st, short


def estimated_cost(request: Request) -> Cost:
    """The tokens a call reserves against its model's token limits before it is sent:
    its prompt's characters / 4 (the output schema included), and its `max_tokens`."""
    return Cost(estimate_input_tokens(request.prompt_chars()), request.max_tokens)
