"""The bill: every answer a provider served, written down the moment it arrives.

A provider charges for each answer it sends, whatever happens to it next: a job cut
short, a call made ahead of a job that never asked for it, an answer too large to keep, a
structured answer that missed its schema. So each answer is one line in
`<store's parent>/bill/<run>/<host>-<pid>.jsonl` before anything else is done with it,
with the model id the provider said served it (`served`) where it said one.
The line goes out in one `write` on a file opened for appending, the way the call store
writes its entries (no fsync): a killed process loses only the calls still in flight.

What a call cost is computed once, as its answer arrives (kora.llm.money.paying), and written
here: what the tool says a run or a result paid (the progress line, usage.json, `kora
usage`, a budget's start, `kora plan`'s tokens a call) is read from these lines and
nowhere else, and a budget under way adds up the figures the lines are written with.
Beside them, `run.json` records the run itself (kora.run.session): when it started, its
targets and command, then when and how it ended.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from kora.llm.base import Response
from kora.llm.money.usage import Counts
from kora.llm.settings.config import Price
from kora.llm.store.files import write_atomic

# a call made outside a Snakemake run (`kora ping`): its lines go under this run name
OUTSIDE = "outside-a-run"


def bill_dir(store: Path) -> Path:
    """The bill's folder for a call store's folder: beside it, as the batches are."""
    return store.parent / "bill"


def record_run(folder: Path, run: str, **facts: object) -> None:
    """Add `facts` to the run's record: at its start `started`, `targets`, `command`; at its
    end `ended` and `outcome` (how it ended). A record that cannot be written costs the run
    nothing: the bill's lines are what counts."""
    path = folder / run / "run.json"
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, orjson.dumps({**run_record(folder, run), **facts}))


def run_record(folder: Path, run: str) -> dict[str, Any]:
    """The run's record; empty for calls outside a run (`kora ping`'s, `OUTSIDE`)."""
    try:
        doc = orjson.loads((folder / run / "run.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


@dataclass(frozen=True)
class Charge:
    """One served answer: who asked, for what, and what it cost."""

    t: float  # seconds since the epoch, when the answer arrived
    run: str
    model: str  # the model's name in the config
    stage: str
    counts: Counts  # calls=1, the answer's tokens and its cost at the model's price
    api_model: str | None = None  # the provider's model name as configured
    key: str | None = None  # its call-store key: which call it answered
    batch: str | None = None  # the provider's batch, when it came in one
    ahead: bool = False  # made ahead of its job (kora.run.broker.prefetch)
    served: str | None = None  # the model id the provider said answered (a dated snapshot)

    def line(self) -> bytes:
        c = self.counts
        doc: dict[str, Any] = {
            "t": round(self.t, 3),
            "run": self.run,
            "model": self.model,
            "stage": self.stage,
            "in": c.input_tokens,
            "out": c.output_tokens,
            "cost": round(c.cost, 9),
        }
        if c.cache_write_tokens or c.cache_read_tokens:
            doc["cw"], doc["cr"] = c.cache_write_tokens, c.cache_read_tokens
            doc["saved"] = round(c.cache_saved, 9)
        if c.reasoning_tokens:
            doc["rt"] = c.reasoning_tokens
        for name in ("api_model", "served", "key", "batch"):
            if getattr(self, name) is not None:
                doc[name] = getattr(self, name)
        if self.ahead:
            doc["ahead"] = True
        return orjson.dumps(doc) + b"\n"

    @classmethod
    def parse(cls, raw: bytes) -> Charge | None:
        """A line as written; None for one cut short by a kill, or not ours."""
        try:
            d = orjson.loads(raw)
            counts = Counts(
                calls=1,
                input_tokens=int(d["in"]),
                output_tokens=int(d["out"]),
                cost=float(d["cost"]),
                cache_write_tokens=int(d.get("cw", 0)),
                cache_read_tokens=int(d.get("cr", 0)),
                cache_saved=float(d.get("saved", 0.0)),
                reasoning_tokens=int(d.get("rt", 0)),
            )
            return cls(
                t=float(d["t"]),
                run=str(d["run"]),
                model=str(d["model"]),
                stage=str(d["stage"]),
                counts=counts,
                api_model=d.get("api_model"),
                key=d.get("key"),
                batch=d.get("batch"),
                ahead=bool(d.get("ahead", False)),
                served=d["served"] if isinstance(d.get("served"), str) else None,
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None


class BillWriter:
    """This process's lines of one run's bill, in a file of its own (no other writer); with
    no folder, summed by model and kind of call in `sums` (`kora plan`'s walk: what its
    offline models' answers cost)."""

    def __init__(self, folder: Path | None, run: str) -> None:
        self.folder = folder
        self.run = run
        self.sums: dict[tuple[str, str], Counts] = defaultdict(Counts)
        self._fd = -1
        self._pid = -1

    @property
    def path(self) -> Path:
        assert self.folder is not None
        return self.folder / self.run / f"{socket.gethostname()}-{os.getpid()}.jsonl"

    def _open(self) -> int:
        if self._pid != os.getpid():  # a forked child writes a file of its own
            path = self.path
            path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
            self._fd, self._pid = os.open(path, flags, 0o644), os.getpid()
        return self._fd

    def charge(
        self,
        model: str,
        stage: str,
        resp: Response,
        price: Price | None,
        *,
        api_model: str | None = None,
        key: str | None = None,
        ahead: bool = False,
    ) -> Counts:
        """Write one served answer down, at `price`; what it cost (`Counts.paid`)."""
        paid = Counts.paid(resp, price)
        batch = resp.meta.get("batch")
        entry = Charge(
            t=time.time(),
            run=self.run,
            model=model,
            stage=stage,
            counts=paid,
            api_model=api_model,
            key=key,
            batch=str(batch) if batch else None,
            ahead=ahead,
            served=served if isinstance(served := resp.meta.get("model"), str) else None,
        )
        if self.folder is None:
            self.sums[(model, stage)] += paid
            return paid
        # the bill must not cost the answer: a full disk is said by the call store's
        # write of the same answer, which follows
        with contextlib.suppress(OSError):
            os.write(self._open(), entry.line())
        return paid

    def close(self) -> None:
        if self._fd >= 0 and self._pid == os.getpid():
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd, self._pid = -1, -1


def _lines(path: Path, offset: int = 0) -> Iterator[bytes]:
    """The whole lines of a bill file from `offset`, one at a time (a whole grid's file
    is 100,000 lines); a line still being written is left for the next read."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            for raw in f:
                if not raw.endswith(b"\n"):
                    return
                yield raw
    except OSError:
        return


def _first(c: Charge, seen: set[tuple[str, str]]) -> bool:
    """Not an answer of a batch read before: a batch's answer read twice (a run stopped
    between reading a batch and storing its answers reads it again when it resumes) was
    billed once, and is counted once."""
    if c.batch is None or c.key is None:
        return True
    if (c.batch, c.key) in seen:
        return False
    seen.add((c.batch, c.key))
    return True


def charges(
    folder: Path, *, run: str | None = None, since: float | None = None
) -> Iterator[Charge]:
    """Every line of the bill (one run's with `run`), from `since` (epoch seconds) on, a
    batch's answer read twice once."""
    runs = [folder / run] if run is not None else sorted(p for p in folder.glob("*") if p.is_dir())
    seen_batch: set[tuple[str, str]] = set()
    for d in runs:
        for path in sorted(d.glob("*.jsonl")):
            for raw in _lines(path):
                c = Charge.parse(raw)
                if c is not None and (since is None or c.t >= since) and _first(c, seen_batch):
                    yield c


def total(folder: Path, *, since: float | None = None) -> Counts:
    return sum((c.counts for c in charges(folder, since=since)), Counts())


class RunTail:
    """One run's bill read as it grows (the progress line): each call adds only the lines
    written since the last."""

    def __init__(self, folder: Path, run: str) -> None:
        self.dir = folder / run
        self._offsets: dict[Path, int] = {}
        self._batches: set[tuple[str, str]] = set()
        self.counts = Counts()
        self.by_kind: dict[str, Counts] = defaultdict(Counts)  # the same by kind of call

    def read(self) -> Counts:
        for path in sorted(self.dir.glob("*.jsonl")):
            start = self._offsets.get(path, 0)
            lines = list(_lines(path, start))
            self._offsets[path] = start + sum(map(len, lines))
            for raw in lines:
                c = Charge.parse(raw)
                if c is None or not _first(c, self._batches):
                    continue
                self.counts += c.counts
                self.by_kind[c.stage] += c.counts
        return replace(self.counts)
