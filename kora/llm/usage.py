"""Calls, tokens and cost: one set of counters, summed the same way everywhere (a job's
usage by model and stage, the run's progress line, a target's usage.json)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kora.llm.base import Response
from kora.llm.config import Price


@dataclass
class Counts:
    calls: int = 0
    cached: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    # the provider's prompt cache: tokens written and read, and what it saved against
    # paying the input price for all of them (less, or negative, when writes go unread)
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cache_saved: float = 0.0
    # paid answers the call store could not keep (a full disk): used, but not kept
    unstored: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(*[getattr(self, n) + getattr(other, n) for n in _COUNTERS])

    def __iadd__(self, other: Counts) -> Counts:
        # a job adds each paid call to its counters: in place, with no new object
        for n in _COUNTERS:
            setattr(self, n, getattr(self, n) + getattr(other, n))
        return self

    def __sub__(self, other: Counts) -> Counts:
        return Counts(*[getattr(self, n) - getattr(other, n) for n in _COUNTERS])

    def __mul__(self, k: float) -> Counts:
        """Each counter times `k` (an estimate of `k` calls like this one)."""
        return Counts(*[getattr(self, n) * k for n in _COUNTERS])

    def counters(self) -> dict[str, Any]:
        """Every counter by name, as written (a progress snapshot; `from_dict` reads it):
        what `dataclasses.asdict` gives, without its deep copy of each value."""
        return {n: getattr(self, n) for n in _COUNTERS}

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "calls": self.calls,
            "cached": self.cached,
            "failures": self.failures,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": round(self.cost, 6),
        }
        if self.cache_write_tokens or self.cache_read_tokens:
            out["cache_write_tokens"] = self.cache_write_tokens
            out["cache_read_tokens"] = self.cache_read_tokens
            out["cache_saved"] = round(self.cache_saved, 6)
        if self.unstored:
            out["unstored"] = self.unstored
        return out

    @classmethod
    def paid(cls, resp: Response, price: Price | None) -> Counts:
        """One answered, paid call (`price` as `ModelConfig.cost_price`)."""
        tin, tout = resp.input_tokens, resp.output_tokens
        write, read = resp.cache_write_tokens, resp.cache_read_tokens
        cost = saved = 0.0
        if price is not None and resp.meta.get("batch"):
            # batches are billed at half the price of every token (both providers)
            price = price.model_copy(
                update={k: v / 2 for k, v in price.model_dump().items() if v is not None}
            )
        if price is not None:
            cw = price.input if price.cache_write is None else price.cache_write
            cr = price.input if price.cache_read is None else price.cache_read
            cost = (tin * price.input + tout * price.output + write * cw + read * cr) / 1e6
            saved = (read * (price.input - cr) - write * (cw - price.input)) / 1e6
        out = cls(calls=1, input_tokens=tin, output_tokens=tout, cost=cost)
        out.cache_write_tokens, out.cache_read_tokens, out.cache_saved = write, read, saved
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Counts:
        """The counters of a written record (a status file's usage row, a snapshot)."""
        # each counter's type is its default's: int counts, float dollars
        return cls(**{f.name: type(f.default)(d.get(f.name, f.default)) for f in fields(cls)})  # type: ignore[misc]


# the counters in field order (`dataclasses.fields` builds them anew at each call)
_COUNTERS = tuple(f.name for f in fields(Counts))


@dataclass
class Usage:
    """Tokens and calls by (model, stage). Cached answers count as calls but cost nothing."""

    by: dict[tuple[str, str], Counts] = field(default_factory=lambda: defaultdict(Counts))
    # each call the job's records rest on, by call-store key, with its answer's tokens and
    # cost at the model's price, paid now or earlier: usage.json sums them (each once)
    # into what the result cost
    used: dict[str, tuple[str, str, Counts]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    waiting: int = 0  # calls sleeping before a retry, now
    last_retry: str = ""  # why the latest of them failed

    def add(
        self, model: str, stage: str, resp: Response | None, price: Price | None, *, cached: bool
    ) -> None:
        u = self.by[(model, stage)]
        if resp is None:
            u.calls += 1
            u.failures += 1
        elif cached:
            u.calls += 1
            u.cached += 1
        else:
            u += Counts.paid(resp, price)

    def use(self, key: str, model: str, stage: str, resp: Response, price: Price | None) -> None:
        """A call the job's records rest on (the first answer under its key)."""
        if key not in self.used:
            self.used[key] = (model, stage, Counts.paid(resp, price))

    def used_records(self) -> list[list[Any]]:
        """The calls the job's records rest on, for its status file: `[key, model, stage,
        input, output, cache write, cache read tokens, cost, what the prompt cache saved]`
        each (`rested_on` reads them)."""
        rows: list[list[Any]] = []
        for key, (model, stage, c) in self.used.items():
            tokens = [c.input_tokens, c.output_tokens, c.cache_write_tokens, c.cache_read_tokens]
            rows.append([key, model, stage, *tokens, round(c.cost, 9), round(c.cache_saved, 9)])
        return rows

    def add_unstored(self, model: str, stage: str) -> None:
        """A paid answer the call store could not keep."""
        self.by[(model, stage)].unstored += 1

    def totals(self) -> Counts:
        return sum(self.by.values(), Counts())

    def records(self) -> list[dict[str, Any]]:
        return [{"model": m, "stage": s, **u.as_dict()} for (m, s), u in sorted(self.by.items())]


def rested_on(rows: list[list[Any]]) -> dict[str, tuple[str, str, Counts]]:
    """A status file's `calls` (`Usage.used_records`) as `Usage.used` holds them."""
    out: dict[str, tuple[str, str, Counts]] = {}
    for key, model, stage, tin, tout, write, read, cost, saved in rows:
        counts = Counts(calls=1, input_tokens=tin, output_tokens=tout, cost=cost)
        counts.cache_write_tokens, counts.cache_read_tokens = write, read
        counts.cache_saved = saved
        out[key] = (model, stage, counts)
    return out
