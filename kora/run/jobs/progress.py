"""Run-wide progress: calls done, failures, shards, and what the run has paid.

Each job writes a small snapshot to `.kora/progress/<run>/<pid>.json` (at most once a
second): the calls it asked for, how far its shard is. The Snakemake process sums the
snapshots of the run and prints one line every few seconds, so a user sees calls and
money move, not only finished jobs. The money is not the snapshots': it is the run's
bill (kora.llm.money.bill), read as it grows, so the line's last figures are what usage.json
and `kora usage` say the run paid.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from kora.benchmarks.layout import progress_dir
from kora.llm.masking import terminal_safe
from kora.llm.money.bill import RunTail
from kora.llm.money.usage import Counts, asked_row
from kora.llm.store.files import write_over
from kora.run.transport import protocol

if TYPE_CHECKING:  # the Snakemake process imports this module for the monitor only
    from kora.llm.money.usage import Usage


class ShardProgress(Protocol):
    """How far a job is with its shard's items."""

    stage: str
    shard: str
    items: int
    done: int
    failed: int


RUN_ENV = protocol.RUN_ENV
INTERVAL = 1.0  # seconds between a job's snapshots, at most


class ProgressReporter:
    """A job's snapshots, made on its event loop (kora.run.jobs.shard_run)."""

    def __init__(self, usage: Usage, workdir: Path, report: ShardProgress) -> None:
        self.usage = usage
        self.report = report
        run_id = os.environ.get(RUN_ENV)
        self.path = (
            progress_dir(workdir, run_id) / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.json"
            if run_id
            else None
        )
        self._last = 0.0
        self._written = b""
        self.closed = False
        self.update(report, force=True)
        # a snapshot every interval, not only when an item ends: calls waiting to retry
        # (a 529 storm, say) then show on the line instead of a silent pause
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(INTERVAL)
            self.update(self.report)

    def update(self, report: ShardProgress, force: bool = False) -> None:
        if self.path is None:
            return
        now = time.monotonic()
        if not force and now - self._last < INTERVAL:
            return
        self._last = now
        snapshot = {
            "stage": report.stage,
            "shard": report.shard,
            "items": report.items,
            "items_done": report.done,
            "items_failed": report.failed,
            **asked_row(self.usage.totals()),
            "waiting": self.usage.waiting,
            "last_retry": self.usage.last_retry,
            "closed": self.closed,
        }
        data = orjson.dumps(snapshot)
        if data == self._written:  # a shard waiting on its calls: nothing new to say
            return
        # progress is a courtesy; never fail a job over it
        with contextlib.suppress(OSError):
            write_over(self.path, data)
            self._written = data

    def close(self) -> None:
        self._ticker.cancel()
        self.closed = True
        self.update(self.report, force=True)


@dataclass
class Totals:
    """Where the run is: the calls its jobs asked for (summed over their snapshots), its
    shards, and what it paid (its bill, kora.llm.money.bill)."""

    calls: int = 0
    cached: int = 0  # answered from the call store
    failures: int = 0
    unstored: int = 0  # paid answers the call store could not keep
    shards: int = 0  # begun
    shards_done: int = 0
    shards_failed: int = 0  # done with failed items
    waiting: int = 0
    last_retry: str = ""
    paid: Counts = field(default_factory=Counts)
    projected: float | None = None  # dollars paid at the run's end, at this pace


class Snapshots:
    """The run's snapshots as last read: a file is read again only once its time or size
    changed, and a closed one (its job's last) is added to the totals once and never
    looked at again. A whole grid's run ends with 3,000 of them, one a shard: reading
    every one at each line cost Snakemake's process 0.1-0.16 s of CPU a line by then,
    and `stat`ing and summing them all, a quarter of its CPU at work."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._open: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}
        self._closed: set[str] = set()
        self._closed_sum = Totals()

    def totals(self, paid: Counts | None = None) -> Totals:
        """The run's totals: its closed snapshots' sum, kept, and its open ones, read now
        where they changed."""
        t = Totals(paid=paid or Counts())
        _add_totals(t, self._closed_sum)
        try:
            entries = [e for e in os.scandir(self.directory) if e.name.endswith(".json")]
        except FileNotFoundError:
            return t
        for entry in entries:
            if entry.name in self._closed:
                continue
            try:
                st = entry.stat()
                seen = (st.st_mtime_ns, st.st_size)
                known = self._open.get(entry.name)
                if known is None or known[0] != seen:
                    known = self._open[entry.name] = (seen, orjson.loads(_read(entry.path)))
            except (OSError, orjson.JSONDecodeError):
                continue  # gone, or caught while it was written: read at the next line
            s = known[1]
            if not isinstance(s, dict):
                continue
            # a job writes nothing after its closing snapshot (ProgressReporter.close)
            if s.get("closed"):
                self._closed.add(entry.name)
                del self._open[entry.name]
                _add_snapshot(self._closed_sum, s)
            _add_snapshot(t, s)
        return t


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# the counts a snapshot holds under the same names as Totals', summed over the run
SUMMED = ("calls", "cached", "failures", "unstored", "waiting")


def _add_snapshot(t: Totals, s: dict[str, Any]) -> None:
    for name in SUMMED:
        setattr(t, name, getattr(t, name) + int(s.get(name, 0)))
    t.shards += 1
    if s.get("closed"):
        t.shards_done += 1
        t.shards_failed += bool(s.get("items_failed"))
    if s.get("waiting") and s.get("last_retry"):
        t.last_retry = str(s["last_retry"])


def _add_totals(t: Totals, more: Totals) -> None:
    """`more`'s snapshot counts added to `t` (not its paid figures: those are the bill's)."""
    for name in (*SUMMED, "shards", "shards_done", "shards_failed"):
        setattr(t, name, getattr(t, name) + getattr(more, name))
    t.last_retry = more.last_retry or t.last_retry


def format_totals(t: Totals, planned_calls: int | None = None, shards: int | None = None) -> str:
    """The progress line: the calls answered of the run's total, its shards, what it paid
    and what it will have paid at its end. Answered: each answer paid for (its bill, a
    call made ahead of its job counted once, as it arrives) and each found in the call
    store (the jobs' snapshots: a call made before, in an earlier run or this one)."""
    answered = t.paid.calls + t.cached
    # the plan counts nominal calls where the store cannot tell: retries can add some
    total = max(planned_calls or 0, answered)
    of = f" of {total:,}" if planned_calls else ""
    share = f" ({100 * answered // total}%)" if planned_calls else ""
    p = t.paid
    line = f"[kora] calls {answered:,}{of} answered{share}, {t.cached:,} from the call store"
    if t.failures:
        line += f", {t.failures:,} failed"
    line += f" | shards {t.shards_done} of {max(shards or 0, t.shards)} done"
    if t.shards_failed:
        line += f" ({t.shards_failed} with failed items)"
    line += (
        f" | paid ${p.cost:.4f} for {p.calls:,} calls ({p.input_tokens:,} tokens in, "
        f"{p.output_tokens:,} out"
    )
    line += f", {p.reasoning_tokens:,} of them reasoning)" if p.reasoning_tokens else ")"
    if t.projected is not None and answered < total:
        line += f", about ${t.projected:,.2f} by the run's end"
    if p.cache_read_tokens or p.cache_write_tokens:
        line += (
            f" | prompt cache: {p.cache_read_tokens:,} tokens read, "
            f"{p.cache_write_tokens:,} written, saved ${p.cache_saved:.4f}"
        )
    if t.unstored:
        line += f" | {t.unstored} paid answers NOT STORED (call store full?)"
    if t.waiting:
        line += f" | {t.waiting} waiting to retry ({terminal_safe(t.last_retry)[:80]})"
    return line


def paid_summary(t: Totals) -> str:
    """What a run says it paid when it ends: its bill, the same figures as its last line."""
    return f"this run paid {t.paid.calls:,} calls: {t.paid.said()} (`kora usage`: every run's bill)"


class Monitor:
    """Prints run totals from the Snakemake process while jobs run."""

    def __init__(self, workdir: Path, run_id: str, bill: Path) -> None:
        self.dir = progress_dir(workdir, run_id)
        self.planned: int | None = None  # the calls the plan counted (set once it is in)
        # the run's total dollars at its end, from what it paid by kind of call (set once
        # the plan of its calls is in)
        self.project: Callable[[dict[str, Counts]], float] | None = None
        self.shards: int | None = None  # the run's shards, when known
        # where batch mode keeps its batches (kora.llm.providers.batch); set from the config
        self.batches: Path | None = None
        # the run's bill (kora.llm.money.bill): what the line says was paid
        self.bill = RunTail(bill, run_id)
        self.started = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="kora-progress")
        self._last = ""
        self._lock = threading.Lock()
        self._snapshots = Snapshots(self.dir)

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(5.0):  # a line every 5 seconds
            self.print()

    def totals(self, *, fresh: bool = False) -> Totals:
        """`fresh`: every snapshot read again (the run's last line), not only changed ones."""
        with self._lock:  # the bill is read on from where the last reading stopped
            snapshots = Snapshots(self.dir) if fresh else self._snapshots
            return snapshots.totals(self.bill.read())

    def print(self, totals: Totals | None = None) -> None:
        t = totals or self.totals()
        if self.project is not None and t.paid.calls:
            t.projected = self.project(self.bill.by_kind)
        line = format_totals(t, self.planned, self.shards)
        if self.batches is not None and self.batches.is_dir():
            from kora.llm.providers.batch import batch_counts

            n = batch_counts(self.batches, self.started)
            if n["in_progress"] or n["ended"]:
                line += f" | batches: {n['in_progress']} in progress, {n['ended']} done"
        if line != self._last:
            print(line, file=sys.stderr, flush=True)
            self._last = line

    def stop(self) -> Totals:
        """The run's last line printed, then what it paid; its totals."""
        self._stop.set()
        totals = self.totals(fresh=True)
        self.print(totals)
        print(f"kora: {paid_summary(totals)}", file=sys.stderr, flush=True)
        # the snapshots only serve this run's progress line
        shutil.rmtree(self.dir, ignore_errors=True)
        return totals


def unstored_warning(n: int, store: str) -> str | None:
    """What a run says at its end when the call store could not keep `n` paid answers."""
    if not n:
        return None
    return (
        f"the call store {store} could not keep {n} paid answer{'s' if n != 1 else ''} "
        "(a full disk or quota; see the job logs): the jobs used them, but a run that "
        "needs them again pays for them again. Free space, then run the same command."
    )
