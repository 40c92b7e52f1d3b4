"""A budget: no call starts that could take the bill past it.

The config's `budget: {usd: 25}` (or `{tokens: N}`) caps the workspace's bill, what `kora
usage` sums (kora.llm.money.bill), from the first run that set a budget on (`counting_since`;
`since: DATE` in the budget sets the day instead): a run stopped by its budget and the
runs that go on from it count together, a pilot run before any budget does not. Before a
call is
sent it reserves its worst case, the prompt's tokens counted generously and all of its
`max_tokens` at the model's price; when the answer comes the reservation is settled at
what the answer cost. A call that does not fit waits while other calls hold reservations
(they usually cost less than their worst case); when none is left in flight and it still
does not fit, the budget is reached: that call and every later one fail with
`BudgetReached`, and the run stops. So the bill stays under the budget, and stops within
one call's worst case of it.

Every process of a run (the broker, jobs on other nodes) shares one small state file
under `fcntl.flock`, written at the run's start with what the bill held then.
"""

from __future__ import annotations

import asyncio
import fcntl
import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict, TypeVar

import orjson

from kora.llm.base import Request
from kora.llm.money.usage import Counts
from kora.llm.settings.config import Price
from kora.llm.store.files import replace_contents

Unit = Literal["usd", "tokens"]
# seconds between two looks at the shared state while a call waits for others to settle
WAIT = 0.05
# a prompt's tokens, counted generously from its characters: English runs near four
# characters a token, and a reservation that falls short could take the bill past the
# budget, where one that is too large only makes the last calls wait for the others
CHARS_PER_TOKEN = 2
# what a provider adds to the prompt (the structured answer's tool or format wrapper)
OVERHEAD_TOKENS = 400


class BudgetReached(Exception):
    """A call the budget leaves no room for: the run stops, what it paid is kept."""

    def __init__(self, unit: Unit, limit: float, spent: float, need: float = 0.0) -> None:
        self.unit, self.limit, self.spent, self.need = unit, limit, spent, need
        said = f"the budget is reached: {amount(unit, spent)} billed of {amount(unit, limit)}"
        if need:
            said += f"; the next call could cost up to {amount(unit, need)}"
        super().__init__(said)


def amount(unit: Unit, value: float) -> str:
    return f"${value:,.4f}" if unit == "usd" else f"{value:,.0f} tokens"


def suggest(unit: Unit, need: float, since: object = None) -> str:
    """A budget of at least `need`, rounded up to two significant figures, counting from
    `since` as the one it replaces did, as `--config budget=...` takes it."""
    step = 10 ** (math.floor(math.log10(need)) - 1) if need > 0 else 1
    day = f", since: {since}" if since is not None else ""
    return f"{{{unit}: {math.ceil(need / step - 1e-9) * step:.10g}{day}}}"


def worst_case(request: Request, price: Price | None) -> Counts:
    """The most a call can cost: its prompt counted generously, its whole `max_tokens`."""
    return most(
        request.prompt_chars() // CHARS_PER_TOKEN + OVERHEAD_TOKENS, request.max_tokens, price
    )


def most(tin: int, tout: int, price: Price | None) -> Counts:
    """What a call of `tin` input and `tout` output tokens costs at most: every input
    token at the dearest of the input, cache-write and cache-read prices."""
    out = Counts(calls=1, input_tokens=tin, output_tokens=tout)
    if price is not None:
        dearest = max(price.input, price.cache_write or 0.0, price.cache_read or 0.0)
        out.cost = (tin * dearest + tout * price.output) / 1e6
    return out


def measure(unit: Unit, c: Counts) -> float:
    """What a call counts against a budget in `unit`."""
    if unit == "usd":
        return c.cost
    return float(c.input_tokens + c.output_tokens + c.cache_write_tokens + c.cache_read_tokens)


@dataclass
class Budget:
    """The run's budget, as every process of the run holds it (its state file)."""

    path: Path
    unit: Unit
    limit: float

    @classmethod
    def start(cls, path: Path, unit: Unit, limit: float, billed: float) -> Budget:
        """The budget of a run starting now, with `billed` already spent (the bill)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        state: _State = {
            "unit": unit,
            "limit": limit,
            "spent": billed,
            "held": {},
            "reached": False,
        }
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(orjson.dumps(state))
        os.replace(tmp, path)
        return cls(path, unit, limit)

    def _update(self, change: Callable[[_State], T]) -> T:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = b""
            while chunk := os.read(fd, 1 << 16):
                raw += chunk
            state: _State
            try:
                state = orjson.loads(raw)
            except orjson.JSONDecodeError:
                # the run's start writes it whole: a damaged file stops the run rather
                # than let it spend without a cap
                state = {"spent": float("inf"), "held": {}, "reached": True}
            out = change(state)
            data = orjson.dumps(state)
            # twice a call: cut to nothing first, the file would free its block each
            # time, which a disk mounted with `discard` waits for (kora.llm.store.files)
            replace_contents(fd, data)
            return out
        finally:
            os.close(fd)  # and the lock with it

    def spent(self) -> float:
        return float(self._update(lambda s: s["spent"]))

    async def reserve(self, worst: Counts) -> float:
        """Hold room for a call's worst case (waiting while other calls hold theirs);
        BudgetReached when there is none and no other call will give any back."""
        need = measure(self.unit, worst)
        if not need:  # a call that costs nothing in the budget's unit (a free model's)
            return need
        me = _me()

        def take(state: _State) -> tuple[bool, bool, float, float]:
            """(room held, budget reached, spent so far, the worst case of the call that
            found no room: every later call reports it, so what the run says adds up
            whichever of its calls is refused last)"""
            held = _alive(state.setdefault("held", {}))
            if not state.get("reached"):
                if state["spent"] + sum(held.values()) + need <= self.limit:
                    held[me] = held.get(me, 0.0) + need
                    return True, False, state["spent"], need
                if not held:  # nobody will give any room back
                    state["reached"] = True
                    state["need"] = need
            return False, bool(state.get("reached")), state["spent"], state.get("need", need)

        while True:
            ok, reached, spent, blocked = self._update(take)
            if ok:
                return need
            if reached:
                raise BudgetReached(self.unit, self.limit, spent, blocked)
            await asyncio.sleep(WAIT)

    def settle(self, held: float, paid: Counts | None) -> None:
        """A reservation given back, and what the answer cost as the bill wrote it (`paid`
        None: no answer)."""
        cost = 0.0 if paid is None else measure(self.unit, paid)
        me = _me()

        def give(state: _State) -> None:
            h = state.setdefault("held", {})
            h[me] = max(h.get(me, 0.0) - held, 0.0)
            if h[me] <= 1e-12:
                del h[me]
            state["spent"] += cost

        self._update(give)


T = TypeVar("T")


class _State(TypedDict, total=False):
    """The budget's file, which every process of the run reads and changes under its lock."""

    unit: Unit
    limit: float
    spent: float
    held: dict[str, float]  # the room each process's calls in flight hold (host:pid)
    reached: bool
    need: float  # the worst case of the call that found no room


def _me() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(held: dict[str, float]) -> dict[str, float]:
    """The reservations of processes still alive (a killed job's never settle); another
    host's cannot be checked from here and are kept."""
    here = socket.gethostname()
    for who in list(held):
        host, _, pid = who.rpartition(":")
        if host == here and pid.isdigit():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                del held[who]
            except PermissionError:
                pass
    return held


def budget_file(store: Path, run: str) -> Path:
    """Where a run's budget state lives, beside the call store."""
    return store.parent / "budget" / f"{run}.json"


def counting_since(store: Path, given: float | None = None, *, start: bool = True) -> float:
    """From when the workspace's bill counts against a budget (epoch seconds): `given`
    (the budget's `since`), else when a run first set a budget here (written down then,
    `start`; without it, as if a run started now)."""
    if given is not None:
        return given
    record = store.parent / "budget" / "since.json"
    try:
        return float(orjson.loads(record.read_bytes())["since"])
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        now = time.time()
        if not start:
            return now
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(orjson.dumps({"since": now}))
        os.replace(tmp, record)
        return now
