"""Run-wide progress: calls done, failures, tokens and cost, across parallel jobs.

Each job writes a small snapshot to `.kora/progress/<run>/<pid>.json` (at most once a
second); the Snakemake process sums the snapshots of the run and prints one line every
few seconds, so a user sees calls and money move, not only finished jobs.
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
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from kora.llm.files import write_over
from kora.llm.masking import terminal_safe
from kora.llm.usage import Counts

if TYPE_CHECKING:  # the Snakemake process imports this module for the monitor only
    from kora.llm.usage import Usage


class ShardProgress(Protocol):
    """How far a job is with its shard's items."""

    stage: str
    shard: str
    items: int
    done: int
    failed: int


RUN_ENV = "KORA_RUN_ID"


def progress_dir(workdir: Path, run_id: str) -> Path:
    return workdir / ".kora" / "progress" / run_id


class ProgressReporter:
    def __init__(
        self, usage: Usage, workdir: Path, report: ShardProgress, interval: float = 1.0
    ) -> None:
        self.usage = usage
        self.report = report
        self.interval = interval
        run_id = os.environ.get(RUN_ENV)
        self.path = (
            progress_dir(workdir, run_id) / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.json"
            if run_id
            else None
        )
        self._last = 0.0
        self._written = b""
        self.update(report, force=True)
        # a snapshot every interval, not only when an item ends: calls waiting to retry
        # (a 529 storm, say) then show on the line instead of a silent pause
        try:
            self._ticker: asyncio.Task[None] | None = asyncio.get_running_loop().create_task(
                self._tick()
            )
        except RuntimeError:  # no event loop: updates come from items only
            self._ticker = None

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.update(self.report)

    def update(self, report: ShardProgress, force: bool = False) -> None:
        if self.path is None:
            return
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        snapshot = {
            "stage": report.stage,
            "shard": report.shard,
            "items": report.items,
            "items_done": report.done,
            "items_failed": report.failed,
            **asdict(self.usage.totals()),
            "waiting": self.usage.waiting,
            "last_retry": self.usage.last_retry,
        }
        data = orjson.dumps(snapshot)
        if data == self._written:  # a shard waiting on its calls: nothing new to say
            return
        # progress is a courtesy; never fail a job over it
        with contextlib.suppress(OSError):
            write_over(self.path, data)
            self._written = data

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        self.update(self.report, force=True)


@dataclass
class Totals(Counts):
    """The run's calls (summed over its shards' snapshots) and where its shards are
    (`jobs`: shards begun; a Snakemake job holds a risk's shards, kora.run.groups)."""

    jobs: int = 0
    items: int = 0
    items_done: int = 0
    items_failed: int = 0
    waiting: int = 0
    last_retry: str = ""
    ahead: int = 0  # calls made ahead of their jobs, not yet asked for (kora.run.prefetch)


GROWING = (
    "calls", "cached", "failures", "input_tokens", "output_tokens", "cost",
    "cache_read_tokens", "cache_write_tokens", "cache_saved",
)  # fmt: skip


def read_totals(directory: Path) -> Totals:
    calls = Counts()
    jobs = items = items_done = items_failed = waiting = ahead = 0
    last_retry = ""
    for f in directory.glob("*.json"):
        try:
            s: dict[str, Any] = orjson.loads(f.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if s.get("stage") == "ahead":
            # paid already, no job's call yet: in the tokens and cost, not in the calls
            made = Counts.from_dict(s)
            ahead += made.calls
            calls += replace(made, calls=0, cached=0, failures=0)
            continue
        jobs += 1
        calls += Counts.from_dict(s)
        items += int(s.get("items", 0))
        items_done += int(s.get("items_done", 0))
        items_failed += int(s.get("items_failed", 0))
        waiting += int(s.get("waiting", 0))
        if s.get("waiting") and s.get("last_retry"):
            last_retry = str(s["last_retry"])
    return Totals(
        **asdict(calls),
        jobs=jobs,
        items=items,
        items_done=items_done,
        items_failed=items_failed,
        waiting=waiting,
        last_retry=last_retry,
        ahead=ahead,
    )


def format_totals(t: Totals, planned_calls: int | None = None) -> str:
    # the plan counts nominal calls where the store cannot tell: retries can add some
    total = f"/{max(planned_calls, t.calls)}" if planned_calls else ""
    line = (
        f"[kora] calls {t.calls}{total} ({t.cached} answered from the call store, "
        f"{t.failures} failed) | "
        f"items {t.items_done}/{t.items} ({t.items_failed} failed) in {t.jobs} shards | "
        f"tokens in {t.input_tokens:,} out {t.output_tokens:,} | ${t.cost:.4f}"
    )
    if t.cache_read_tokens or t.cache_write_tokens:
        line += (
            f" | prompt cache: {t.cache_read_tokens:,} tokens read, "
            f"{t.cache_write_tokens:,} written, saved ${t.cache_saved:.4f}"
        )
    if t.ahead:
        line += f" | {t.ahead} made ahead of their jobs"
    if t.unstored:
        line += f" | {t.unstored} paid answers NOT STORED (call store full?)"
    if t.waiting:
        line += f" | {t.waiting} waiting to retry ({terminal_safe(t.last_retry)[:80]})"
    return line


class Monitor:
    """Prints run totals from the Snakemake process while jobs run."""

    def __init__(
        self, workdir: Path, run_id: str, planned_calls: int | None = None, every: float = 5.0
    ) -> None:
        self.dir = progress_dir(workdir, run_id)
        self.planned = planned_calls
        # where batch mode keeps its batches (kora.llm.batch); set from the config
        self.batches: Path | None = None
        self.started = time.time()
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="kora-progress")
        self._last = ""
        self._seen: Totals | None = None

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.print()

    def plan(self, count: Callable[[], int]) -> None:
        """The run's total calls, counted beside the run (`kora plan`'s count of the jobs
        it runs): the line shows no total until it is known."""

        def work() -> None:
            try:
                self.planned = count()
            except Exception as exc:  # a courtesy: the run goes on without a total
                print(f"kora: no total for the progress line: {exc}", file=sys.stderr)

        threading.Thread(target=work, daemon=True, name="kora-plan").start()

    def _grown(self, now: Totals) -> Totals:
        """Counters only grow: a call made ahead moves from the broker's snapshot to its
        job's between two readings, and must not be counted twice, then once."""
        seen = self._seen
        if seen is not None:
            now = replace(now, **{k: max(getattr(now, k), getattr(seen, k)) for k in GROWING})
        self._seen = now
        return now

    def print(self) -> None:
        line = format_totals(self._grown(read_totals(self.dir)), self.planned)
        if self.batches is not None and self.batches.is_dir():
            from kora.llm.batch import batch_counts

            n = batch_counts(self.batches, self.started)
            if n["in_progress"] or n["ended"]:
                line += f" | batches: {n['in_progress']} in progress, {n['ended']} done"
        if line != self._last:
            print(line, file=sys.stderr, flush=True)
            self._last = line

    def stop(self) -> Totals:
        """The run's last line printed; its totals."""
        self._stop.set()
        self.print()
        totals = read_totals(self.dir)
        # the snapshots only serve this run's progress line
        shutil.rmtree(self.dir, ignore_errors=True)
        return totals


def unstored_warning(totals: Counts, store: str) -> str | None:
    """What a run says at its end when the call store could not keep paid answers."""
    n = totals.unstored
    if not n:
        return None
    return (
        f"the call store {store} could not keep {n} paid answer{'s' if n != 1 else ''} "
        "(a full disk or quota; see the job logs): the jobs used them, but a run that "
        "needs them again pays for them again. Free space, then run the same command."
    )
