"""What calls cost, and what a job asked for.

`Counts` are paid calls' tokens and dollars: a call's are computed once, by `Counts.paid`,
when its answer arrives, and written in the bill (kora.llm.money.bill); every figure of money
or tokens the tool gives is a sum of the bill's lines. `Usage` is what a job asked for
(calls, answered from the call store, failed) and the calls its records rest on, for its
status file: no tokens and no price."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kora.llm.base import Response
from kora.llm.settings.config import Price

# a job's counts of the calls it asked for (`unstored`: paid answers the call store could
# not keep, used all the same)
ASKED = ("calls", "cached", "failures", "unstored")


@dataclass
class Counts:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    # the provider's prompt cache: tokens written and read, and what it saved against
    # paying the input price for all of them (less, or negative, when writes go unread)
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cache_saved: float = 0.0
    reasoning_tokens: int = 0  # a part of output_tokens, where the provider says

    def __add__(self, other: Counts) -> Counts:
        return Counts(*[getattr(self, n) + getattr(other, n) for n in _COUNTERS])

    def __iadd__(self, other: Counts) -> Counts:
        # a sum of many lines of the bill: in place, with no new object
        for n in _COUNTERS:
            setattr(self, n, getattr(self, n) + getattr(other, n))
        return self

    def __mul__(self, k: float) -> Counts:
        """Each counter times `k` (an estimate of `k` calls like this one)."""
        return Counts(*[getattr(self, n) * k for n in _COUNTERS])

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": round(self.cost, 6),
        }
        if self.cache_write_tokens or self.cache_read_tokens:
            out["cache_write_tokens"] = self.cache_write_tokens
            out["cache_read_tokens"] = self.cache_read_tokens
            out["cache_saved"] = round(self.cache_saved, 6)
        if self.reasoning_tokens:
            out["reasoning_tokens"] = self.reasoning_tokens
        return out

    def said(self) -> str:
        """Its tokens and cost in a user's words (a run's last line, `kora usage`)."""
        said = [f"{self.reasoning_tokens:,} of them reasoning"] if self.reasoning_tokens else []
        if self.cache_write_tokens or self.cache_read_tokens:
            said.append(
                f"{self.cache_write_tokens:,} written to the prompt cache, "
                f"{self.cache_read_tokens:,} read from it"
            )
        line = f"{self.input_tokens:,} input and {self.output_tokens:,} output tokens"
        return line + (f" ({'; '.join(said)})" if said else "") + f", ${self.cost:.4f}"

    @classmethod
    def paid(cls, resp: Response, price: Price | None) -> Counts:
        """One answered call at `price` (`ModelConfig.cost_price`, or `batch_cost_price`
        for an answer that came in a batch): the one place a call's cost is computed, as
        its answer arrives (kora.llm.money.paying), and for `kora plan`'s calls to come."""
        tin, tout = resp.input_tokens, resp.output_tokens
        write, read = resp.cache_write_tokens, resp.cache_read_tokens
        cost = saved = 0.0
        if price is not None:
            cw = price.input if price.cache_write is None else price.cache_write
            cr = price.input if price.cache_read is None else price.cache_read
            cost = (tin * price.input + tout * price.output + write * cw + read * cr) / 1e6
            saved = (read * (price.input - cr) - write * (cw - price.input)) / 1e6
        return cls(1, tin, tout, cost, write, read, saved, resp.reasoning_tokens)


# the counters in field order (`dataclasses.fields` builds them anew at each call)
_COUNTERS = tuple(f.name for f in fields(Counts))


def asked_row(c: Mapping[str, int]) -> dict[str, int]:
    """Counts of calls asked for as a status file and usage.json write them: `unstored`
    only where there were some."""
    return {k: int(c.get(k, 0)) for k in ASKED if k != "unstored" or c.get(k)}


@dataclass
class Usage:
    """A job's calls by (model, kind of call): `ASKED`. Cached answers count as calls."""

    by: dict[tuple[str, str], Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    # each call the job's records rest on, by call-store key, with its model and kind of
    # call: usage.json prices them from the bill, each once, paid now or earlier
    used: dict[str, tuple[str, str]] = field(default_factory=dict)
    waiting: int = 0  # calls sleeping before a retry, now
    last_retry: str = ""  # why the latest of them failed

    def add(self, model: str, stage: str, *, cached: bool = False, failed: bool = False) -> None:
        u = self.by[(model, stage)]
        u["calls"] += 1
        u["cached"] += cached
        u["failures"] += failed

    def use(self, key: str, model: str, stage: str) -> None:
        """A call the job's records rest on."""
        self.used.setdefault(key, (model, stage))

    def used_records(self) -> list[list[str]]:
        """The calls the job's records rest on, for its status file: `[key, model, stage]`
        each (kora.analysis.results.rested_keys reads them)."""
        return [[key, model, stage] for key, (model, stage) in self.used.items()]

    def add_unstored(self, model: str, stage: str) -> None:
        """A paid answer the call store could not keep."""
        self.by[(model, stage)]["unstored"] += 1

    def totals(self) -> Counter[str]:
        return sum(self.by.values(), Counter())

    def records(self) -> list[dict[str, Any]]:
        return [{"model": m, "stage": s, **asked_row(u)} for (m, s), u in sorted(self.by.items())]
