"""Calls, tokens and cost: one set of counters, summed the same way everywhere (a job's
usage by model and stage, the run's progress line, a target's usage.json)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kora.config import Price
from kora.llm.base import Response


@dataclass
class Counts:
    calls: int = 0
    cached: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            calls=self.calls + other.calls,
            cached=self.cached + other.cached,
            failures=self.failures + other.failures,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost=self.cost + other.cost,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cached": self.cached,
            "failures": self.failures,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": round(self.cost, 6),
        }

    @classmethod
    def paid(cls, input_tokens: int, output_tokens: int, price: Price | None) -> Counts:
        """One answered, paid call."""
        cost = (input_tokens * price.input + output_tokens * price.output) / 1e6 if price else 0.0
        return cls(calls=1, input_tokens=input_tokens, output_tokens=output_tokens, cost=cost)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Counts:
        """The counters of a written record (a status file's usage row, a snapshot)."""
        return cls(
            calls=int(d.get("calls", 0)),
            cached=int(d.get("cached", 0)),
            failures=int(d.get("failures", 0)),
            input_tokens=int(d.get("input_tokens", 0)),
            output_tokens=int(d.get("output_tokens", 0)),
            cost=float(d.get("cost", 0.0)),
        )


@dataclass
class Usage:
    """Tokens and calls by (model, stage). Cached answers count as calls but cost nothing."""

    by: dict[tuple[str, str], Counts] = field(default_factory=lambda: defaultdict(Counts))
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
            self.by[(model, stage)] = u + Counts.paid(resp.input_tokens, resp.output_tokens, price)

    def totals(self) -> Counts:
        return sum(self.by.values(), Counts())

    def records(self) -> list[dict[str, Any]]:
        return [{"model": m, "stage": s, **u.as_dict()} for (m, s), u in sorted(self.by.items())]
