"""The rate-limit headers providers send with every answer, in one provider-neutral form.

Anthropic (`anthropic-ratelimit-<bucket>-limit / -remaining / -reset`, the reset an
RFC 3339 time at which the bucket is full again) limits requests, input tokens and output
tokens per minute; OpenAI (`x-ratelimit-limit-<bucket>`, `x-ratelimit-remaining-<bucket>`,
`x-ratelimit-reset-<bucket>`, the reset a duration such as `1s`, `6m0s`, `20ms`) limits
requests and tokens (input and output together). A `Reading` holds one bucket as the
server saw it; `kora.llm.limits` paces calls with it before the server has to refuse one.
All times are wall-clock seconds (`time.time()`), like the limiter's shared state.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Bucket = Literal["requests", "input_tokens", "output_tokens", "tokens"]


@dataclass(frozen=True)
class Reading:
    """One bucket at the moment the server answered."""

    limit: float | None = None  # per minute
    remaining: float | None = None
    reset: float | None = None  # when the bucket is full again


@dataclass(frozen=True)
class ServerLimits:
    requests: Reading | None = None
    input_tokens: Reading | None = None
    output_tokens: Reading | None = None
    tokens: Reading | None = None  # input and output together (OpenAI)

    def get(self, bucket: Bucket) -> Reading | None:
        reading: Reading | None = getattr(self, bucket)
        return reading


_NUMBER = re.compile(r"^\s*\d+(\.\d+)?\s*$")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_number(text: str | None) -> float | None:
    return float(text) if text is not None and _NUMBER.match(text) else None


def parse_duration(text: str | None) -> float | None:
    """Seconds from an OpenAI reset duration: `1s`, `6m0s`, `1h2m3.5s`, `20ms`."""
    if text is None:
        return None
    t = text.strip()
    if not t:
        return None
    parts = _DURATION.findall(t)
    if not parts or "".join(n + u for n, u in parts) != t:
        return parse_number(t)
    return sum(float(n) * _UNIT[u] for n, u in parts)


def parse_time(text: str | None) -> float | None:
    """Wall-clock seconds from an RFC 3339 time (`2026-01-01T00:00:30Z`)."""
    if text is None:
        return None
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _reading(limit: float | None, remaining: float | None, reset: float | None) -> Reading | None:
    if limit is None and remaining is None:
        return None
    return Reading(limit=limit, remaining=remaining, reset=reset)


def from_anthropic(headers: Mapping[str, str]) -> ServerLimits | None:
    """The buckets in an Anthropic answer's headers; None when it has none.

    `anthropic-ratelimit-tokens-*` repeats whichever of the input and output buckets is
    the most restrictive, so it is not a bucket of its own here.
    """

    def bucket(name: str) -> Reading | None:
        p = f"anthropic-ratelimit-{name}-"
        return _reading(
            parse_number(headers.get(p + "limit")),
            parse_number(headers.get(p + "remaining")),
            parse_time(headers.get(p + "reset")),
        )

    limits = ServerLimits(
        requests=bucket("requests"),
        input_tokens=bucket("input-tokens"),
        output_tokens=bucket("output-tokens"),
    )
    return limits if limits != ServerLimits() else None


def from_openai(headers: Mapping[str, str], now: float) -> ServerLimits | None:
    """The buckets in an OpenAI-style answer's headers (received at `now`); None when
    it has none."""

    def bucket(name: str) -> Reading | None:
        reset = parse_duration(headers.get(f"x-ratelimit-reset-{name}"))
        return _reading(
            parse_number(headers.get(f"x-ratelimit-limit-{name}")),
            parse_number(headers.get(f"x-ratelimit-remaining-{name}")),
            None if reset is None else now + reset,
        )

    limits = ServerLimits(requests=bucket("requests"), tokens=bucket("tokens"))
    return limits if limits != ServerLimits() else None
