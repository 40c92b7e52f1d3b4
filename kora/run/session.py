"""One `snakemake` run as the Snakefile drives it: its start, its end, and a stop.

`rules/common.smk` makes a `RunSession` when the workflow is read and calls `start` in
`onstart`, `succeeded` in `onsuccess` and `failed` in `onerror`; everything in between
(the store's lock, the checks before the first job, the budget, the broker and its calls
made ahead, the progress line, what a stop does) is here, typed and tested.

A stop (Ctrl-C at a terminal, SIGINT to Snakemake alone as `timeout -s INT` and CI
runners send it, SIGTERM) ends the run's jobs at once, keeps every answer that arrived
(the call store) and what was paid (the bill), and ends with a few lines: what is done,
what was paid, the command to go on with. That command is the one typed: the workflow
profile (`profiles/default/`) re-runs what a stop cut short, and a lock left by a
Snakemake killed outright is cleared when no Snakemake of the workspace is alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from kora.config.checks import unpriced_for_budget
from kora.errors import ConfigError, KoraError
from kora.llm.lifecycle import lifecycle_notes
from kora.llm.money.bill import bill_dir, record_run, total
from kora.llm.money.budget import Budget, amount, budget_file, counting_since, measure, suggest
from kora.llm.providers.structured import config_warnings
from kora.run.broker.server import Broker, send_ahead, start_broker
from kora.run.jobs.progress import Monitor, Totals, unstored_warning
from kora.run.jobs.stops import closing_summary, rerun_advice, stop_kind
from kora.run.plan import PlanStore, Share, count_jobs, estimate, still_to_pay
from kora.run.preflight import check_models, models_for_jobs
from kora.run.runlock import RunLock, hold
from kora.run.stages.registry import STAGES
from kora.run.transport.jobspec import JobSpec
from kora.run.transport.protocol import say_stopping, stopping_path
from kora.run.workflow import outputs
from kora.run.workflow.pipeline import Pipeline
from kora.run.workflow.risk_jobs import cell_count

# a job's parts as kora.run.workflow.snakemake_api.job_parts gives them: rule, wildcards, input, output,
# params, log
JobParts = tuple[str, dict[str, str], Any, Any, Any, Any]


def say(line: str) -> None:
    print(f"kora: {line}", file=sys.stderr, flush=True)


def go_on_command(argv: Sequence[str], config: dict[str, Any] | None = None) -> str:
    """The command line that was typed, to type again (`config`: `--config` values to
    add, replacing the same keys given before)."""
    words = ["snakemake", *argv[1:]]
    if config:
        kept: list[str] = []
        skip = False
        for i, w in enumerate(words):
            if skip:
                skip = False
                continue
            if w == "--config" and i + 1 < len(words) and words[i + 1].split("=")[0] in config:
                skip = True
                continue
            kept.append(w)
        words = [*kept, "--config", *(f"{k}={v}" for k, v in config.items())]
    return shlex.join(words)


@dataclass
class RunSession:
    pipeline: Pipeline
    run_id: str
    argv: list[str] = field(default_factory=lambda: list(sys.argv))
    monitor: Monitor = field(init=False)
    started: float = field(default_factory=time.time)
    broker: Broker | None = None
    lock: RunLock | None = None
    budget: Budget | None = None
    stopped_by: str | None = None  # the signal that stopped the run
    shares: list[Share] | None = None  # the calls still to pay, by kind (kora.run.plan)

    def __post_init__(self) -> None:
        store = self.store
        self.monitor = Monitor(self.pipeline.workdir, self.run_id, bill=bill_dir(store))
        self.monitor.batches = store.parent / "batches"

    @property
    def store(self) -> Path:
        return self.pipeline.workdir / self.pipeline.config.cache_dir

    def start(self, jobs: list[JobParts], values: dict[str, Any], *, shared: bool) -> None:
        """Before the first job (`jobs`: those the run executes; `values`: Snakemake's config,
        --config included): the store's lock, the checks, the budget, the broker (when
        the jobs run on this machine, in this environment: `shared`), the progress line.
        A KoraError says why the run cannot start."""
        # each shard job as its script will hand it on: a risk's cells in one spec, split
        # into the cells' own only as the broker's prefetch and the plan walk each cell
        # (kora.run.broker.walk); the 3,000 cells' specs of a whole grid, made here and sent at
        # once, held 12 MB and peaked at 27 MB in encoding
        specs = [
            JobSpec.of(name, i, o, p, log, values)
            for name, _, i, o, p, log in jobs
            if name in STAGES
        ]
        config = self.pipeline.config
        # one run at a time on the call store (kora.run.runlock): a second one, started
        # with --nolock, would pay for the calls the first is paying for
        self.lock = hold(self.store, "snakemake run")
        models = models_for_jobs(config, [(name, wc) for name, wc, *_ in jobs])
        targets = sorted({wc["target"] for _, wc, *_ in jobs if "target" in wc})
        self._plan(specs, targets)
        self._start_budget(models)
        # a missing key or a service down would fail every call of the run one by one:
        # stop before any job (unless a fallback chain has another model to take its calls)
        errors, warnings = check_models(config, models)
        if errors:
            raise KoraError("\n".join(errors))
        for note in warnings:
            say(f"warning: {note}")
        for note in lifecycle_notes(config.models, models):
            say(f"warning: {note}")
        for name in sorted(models):
            for note in config_warnings(name, config.models[name]):
                say(f"warning: {note}")
        self._record(started=self.started, targets=targets, command=go_on_command(self.argv))
        # One process makes the model calls of every job on this machine (kora.run.broker.server)
        # and works through the run's shard jobs ahead of them (kora.run.broker.prefetch).
        # KORA_NO_BROKER=1 runs every job in its own process (the results are the same).
        if shared and not os.environ.get("KORA_NO_BROKER"):
            self.broker = start_broker(self.run_id, Path(self.pipeline.layout.log("broker")))
            if self.broker is not None and send_ahead(self.broker, specs) and specs:
                say(
                    "calls are made ahead of the jobs that will use them, to keep the "
                    "providers busy: the progress line counts them as answered, and paid, "
                    "as they arrive"
                )
        self.monitor.shards = sum(cell_count(s) for s in specs)
        self.monitor.start()
        self._on_stop()

    def _plan(self, specs: list[JobSpec], targets: list[str]) -> None:
        """`kora plan` for the run's jobs, on the call store as it is now, before any job:
        their calls (the progress line's total) and what those still to pay cost
        (`self.shares`; the line's projection of the run's total, when every model has a
        price). A configuration error a unit meets (a template's branch the check's sample
        unit does not take) stops the run here, before its first call."""
        try:
            report = asyncio.run(count_jobs(self.pipeline, specs, PlanStore.as_now(self.store)))
        except ConfigError:
            raise
        except Exception as exc:  # a courtesy: the run goes on without a total
            say(f"no total for the progress line: {exc}")
            return
        p = self.pipeline
        self.shares = shares = estimate(p.config, report, targets, p.workdir, p.benchmark)
        self.monitor.planned = report.calls
        if not any(s.unpriced for s in shares):
            self.monitor.project = lambda paid: (
                still_to_pay(shares, "usd", paid)[0] + sum(c.cost for c in paid.values())
            )

    def _start_budget(self, models: set[str]) -> None:
        """The budget's state for every process of the run, from the bill so far; a run
        whose budget is spent already stops here, unless it has no call to pay for, and
        so does one with a budget in dollars that calls a paid model with no price."""
        b = self.pipeline.config.budget
        if b is None:
            return
        if unpriced := unpriced_for_budget(self.pipeline.config, models):
            raise KoraError(unpriced)
        since = counting_since(self.store, b.since_epoch)
        spent = measure(b.unit, total(bill_dir(self.store), since=since))
        self.budget = Budget.start(budget_file(self.store, self.run_id), b.unit, b.limit, spent)
        left = b.limit - spent
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(since))
        say(
            f"budget {amount(b.unit, b.limit)}: {amount(b.unit, spent)} billed since {when} "
            f"(`kora usage --since`), {amount(b.unit, max(left, 0))} left"
        )
        if left > 0:
            return
        rest, room = still_to_pay(self.shares or [], b.unit)
        if room or self.shares is None:
            raise KoraError(
                f"the budget is spent before the run starts, and the calls this run still "
                f"has to pay for are expected to cost {amount(b.unit, rest)} (`kora plan`). "
                f"To go on, raise it: {self.raise_budget()}"
            )
        say("the budget is spent, but this run pays for no call: it goes on")

    def raise_budget(self) -> str:
        """The command that goes on with a budget that should see the run through: what
        is billed, what the calls still to pay are expected to cost (at what this run's
        calls of each kind have cost so far), and room for the dearest call's worst case."""
        b = self.pipeline.config.budget
        if b is None:
            return go_on_command(self.argv)
        if self.shares is None:  # no plan: the run's calls cannot be told
            return go_on_command(self.argv, {"budget": suggest(b.unit, 2 * b.limit, b.since)})
        spent = self.budget.spent() if self.budget is not None else 0.0
        rest, room = still_to_pay(self.shares, b.unit, self.monitor.bill.by_kind)
        return go_on_command(self.argv, {"budget": suggest(b.unit, spent + rest + room, b.since)})

    def _on_stop(self) -> None:
        """SIGINT and SIGTERM to the Snakemake process: its jobs in the broker end now (a
        job's script answered `stopped` exits quietly), then Snakemake's own handling
        (it stops scheduling and waits for the jobs, which are done)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            before = signal.getsignal(sig)

            def handler(signum: int, frame: FrameType | None, before: object = before) -> None:
                if self.stopped_by is None:
                    self.stopped_by = signal.Signals(signum).name
                    # first: a job whose script starts now runs nothing (kora.run.broker.dispatch)
                    say_stopping(self.pipeline.workdir, self.run_id)
                    if self.broker is not None:
                        self.broker.ask_to_stop()
                if callable(before):
                    before(signum, frame)
                elif before == signal.SIG_DFL and signum == signal.SIGINT:
                    raise KeyboardInterrupt

            with contextlib.suppress(ValueError):  # not the main thread: nothing to catch
                signal.signal(sig, handler)

    def _finish(self) -> Totals:
        if self.broker is not None:
            self.broker.stop()  # first: its calls in flight, answered and billed
        return self.monitor.stop()

    def succeeded(self) -> int:
        """The run's end when Snakemake says every job succeeded: its exit status (results
        with failed tests, and paid answers the store could not keep, fail the run)."""
        totals = self._finish()
        for line in outputs.written_summary(self.pipeline, since=self.started):
            say(line)
        # tests that failed must not look like a finished run: name them, exit non-zero
        incomplete = outputs.incomplete_results(self.pipeline, since=self.started)
        if incomplete:
            say(
                "the run finished with failures:\n"
                + "\n".join(incomplete)
                + "\n"
                + rerun_advice(incomplete)
            )
        failed = self._unstored(totals) or bool(incomplete)
        self._record(ended=time.time(), outcome="failures" if failed else "finished")
        self._release()
        return 1 if failed else 0

    def failed(self) -> int | None:
        """The run's end when a job failed or the run was stopped: when a signal stopped
        it, the status a shell gives such a stop (128 + the signal's number); when a job
        stopped on the budget or an error no retry gets past, 1. Either ends the process
        after the closing lines, which are then its last; None: Snakemake ends it."""
        totals = self._finish()
        if self.stopped_by is None and stopping_path(self.pipeline.workdir, self.run_id).exists():
            self.stopped_by = "SIGINT"  # a Ctrl-C that ended a job before it reached here
        how = self.stopped_by or stop_kind(self.pipeline.workdir, self.run_id) or "failed"
        self._record(ended=time.time(), outcome=how)
        lines = closing_summary(
            self.pipeline.workdir, self.run_id, raise_budget=self.raise_budget()
        )
        if self.stopped_by is not None and not lines:
            lines = [
                f"the run was stopped ({self.stopped_by}): {totals.shards_done} of "
                f"{max(self.monitor.shards or 0, totals.shards)} shards done; every answer "
                "paid for is in the call store, and the next run does not pay for it again",
                f"to go on: {go_on_command(self.argv)}",
            ]
        for line in lines:
            say(line)
        self._unstored(totals)
        self._release()
        if self.stopped_by is not None:
            return 128 + signal.Signals[self.stopped_by]
        return 1 if lines else None

    def _record(self, **facts: object) -> None:
        """The run's record beside its bill (`kora usage --runs`)."""
        record_run(bill_dir(self.store), self.run_id, **facts)

    def _unstored(self, totals: Totals) -> bool:
        """Paid answers the call store could not keep (a full disk): said loudly."""
        warning = unstored_warning(totals.unstored, self.pipeline.config.cache_dir)
        if warning:
            say(f"ERROR: {warning}")
        return warning is not None

    def _release(self) -> None:
        if self.lock is not None:
            self.lock.release()
