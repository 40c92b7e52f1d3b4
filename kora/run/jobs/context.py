"""What a stage job calls models through: the model layer's clients, each made from one
whole model config and what the job shares with the run (kora.llm.providers.factories.Shared).

A rule's params carry every setting that changes a result (kora.llm.settings.config.Changes):
Snakemake re-runs a shard when one changes. The settings that only carry the calls come
from the run's config by model name (`RunSettings`): changing a rate limit must not
re-run a finished shard.

A `Pool` lives as long as its process: the job's own, or the run's broker that serves many
jobs (kora.run.broker.server). It keeps one provider (HTTP client, SDK) per model and the taxonomy
and template checks per file version; each job gets its own `JobContext` with its own
usage counters.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from kora.benchmarks.base import Benchmark
from kora.benchmarks.layout import CACHE_DIR, CONCURRENCY, KORA_DIR
from kora.benchmarks.taxonomy import Taxonomy
from kora.config.schema import BudgetConfig
from kora.llm.base import Provider
from kora.llm.chain import Asker, as_asker
from kora.llm.client import ModelClient
from kora.llm.money.bill import OUTSIDE, BillWriter, bill_dir, total
from kora.llm.money.budget import Budget, budget_file, counting_since, measure
from kora.llm.money.usage import Usage
from kora.llm.providers.factories import Shared
from kora.llm.settings.config import ModelConfig
from kora.llm.shared_calls import SharedCalls
from kora.llm.store.cache import CallCache
from kora.llm.targets import Target, open_target
from kora.run.jobs.progress import RUN_ENV

log = logging.getLogger("kora")

# cells (a job's share of a risk: kora.run.workflow.risk_jobs) run at once by every job one process
# serves. A shard job runs its risk's 30 cells side by side, each with its inputs read
# and up to `concurrency` items holding their prompts and transcripts; the broker runs up
# to --cores such jobs at once, so its memory grew with the jobs in it (the whole v1 grid:
# 305 MB against 190 MB for a tenth, bench/README.md). The calls are made ahead of the
# jobs (kora.run.broker.prefetch, 64 cells at once), so a job's cells mostly read answers
# already stored; 32 cells of 16 items still ask more calls than the 450 a 300 req/s
# limit at 1.5 s holds in flight when they make their own (a chat service's). 64 held
# the whole v1 grid's broker at 249 MB, 32 at 228 MB, in the same wall time
CELLS_AT_ONCE = 32


@dataclass(frozen=True)
class RunSettings:
    """The run-wide settings a job takes from the config rather than its params (built by
    kora.run.transport.jobspec.run_settings)."""

    models: dict[str, dict[str, object]]
    cache_dir: str = CACHE_DIR
    concurrency: int = CONCURRENCY
    budget: dict[str, object] | None = None  # the config's `budget` (kora.llm.money.budget)

    def model(self, params: dict[str, Any]) -> ModelConfig:
        """A model's full config: its params (what changes answers) + its transport."""
        return ModelConfig.of_job(params, self.models.get(params["name"], {}))


@dataclass
class Pool:
    """What the jobs served by one process share."""

    workdir: Path
    # providers given by model name, used instead of making one (tests; `kora plan`'s
    # replay from the call store)
    fixed: dict[str, Provider] = field(default_factory=dict)
    # calls in flight and calls made ahead of their jobs, shared by every job served here
    shared_calls: SharedCalls = field(default_factory=SharedCalls)
    # the call store every client uses (default: the config's folder; `kora plan`'s
    # never writes)
    store: CallCache | None = None
    # False: the models send nothing (`kora plan`, which counts while a run may be
    # sending): their calls take no request slots or tokens from the run's shared limits,
    # and are not written in the bill (`kora plan`'s walk keeps its lines in `bill_kept`)
    sends: bool = True
    bill_kept: BillWriter | None = None
    # a cell's turn to run (CELLS_AT_ONCE): taken by kora.run.broker.execute for each cell
    cells: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(CELLS_AT_ONCE))
    _bills: dict[Path, BillWriter] = field(default_factory=dict)
    _budgets: dict[Path, Budget] = field(default_factory=dict)
    providers: dict[tuple[str, str], Provider] = field(default_factory=dict)  # made here
    _taxonomies: dict[tuple[object, ...], Taxonomy] = field(default_factory=dict)

    def bill(self, store: Path) -> BillWriter | None:
        """This process's writer of the bill beside the call store `store` (this run's
        lines: the run's id, or `OUTSIDE` for a call outside a run)."""
        if not self.sends:
            return self.bill_kept
        folder = bill_dir(store)
        if folder not in self._bills:
            self._bills[folder] = BillWriter(folder, os.environ.get(RUN_ENV) or OUTSIDE)
        return self._bills[folder]

    def budget(self, store: Path, given: dict[str, object] | None) -> Budget | None:
        """The run's budget (`given`: the config's `budget`), shared with every process of
        the run through its state file; a job run outside a run has none."""
        run = os.environ.get(RUN_ENV)
        if given is None or not self.sends or not run:
            return None
        cfg = BudgetConfig.model_validate(given)
        path = budget_file(store, run)
        if path in self._budgets:
            return self._budgets[path]
        if not path.exists():  # a job started without the run's start (a cluster node
            # that cannot see it yet): the bill so far, as the start would have written
            since = counting_since(store, cfg.since_epoch)
            spent = measure(cfg.unit, total(bill_dir(store), since=since))
            Budget.start(path, cfg.unit, cfg.limit, spent)
        self._budgets[path] = Budget(path, cfg.unit, cfg.limit)
        return self._budgets[path]

    def taxonomy(self, files: list[Path], benchmark: Benchmark) -> Taxonomy:
        """The taxonomy of a rule's declared input files, as its version reads them
        (loaded once per file version)."""
        stamp = (benchmark.name, *((p, p.stat().st_mtime_ns, p.stat().st_size) for p in files))
        if stamp not in self._taxonomies:
            self._taxonomies[stamp] = benchmark.load_taxonomy(files)
        return self._taxonomies[stamp]

    async def aclose(self) -> None:
        for p in self.providers.values():
            await p.aclose()
        self.providers.clear()
        for bill in self._bills.values():
            bill.close()


@dataclass
class JobContext:
    """One job's view of the pool: its clients count into its own usage."""

    pool: Pool
    settings: RunSettings
    usage: Usage = field(default_factory=Usage)
    ahead: bool = False  # the clients make calls before their jobs ask (kora.run.broker.prefetch)

    @property
    def workdir(self) -> Path:
        return self.pool.workdir

    @property
    def concurrency(self) -> int:
        return self.settings.concurrency

    @cached_property
    def shared(self) -> Shared:
        """What the job's clients share with the run and the process."""
        pool = self.pool
        store = pool.store or CallCache(self.workdir / self.settings.cache_dir)
        return Shared(
            store,
            self.usage,
            pool.shared_calls,
            pool.bill(store.root),
            pool.budget(store.root, self.settings.budget),
            limits=self.workdir / KORA_DIR / "limits",
            made=pool.providers,
            fixed=pool.fixed,
            sends=pool.sends,
            ahead=self.ahead,
        )

    def client(self, params: dict[str, Any]) -> ModelClient:
        return ModelClient(params["name"], self.settings.model(params), self.shared)

    def clients(self, params: dict[str, Any] | list[dict[str, Any]]) -> list[ModelClient]:
        """A role's clients in fallback order (a rule param of one model, or a chain's)."""
        return [self.client(p) for p in (params if isinstance(params, list) else [params])]

    def asker(self, params: dict[str, Any] | list[dict[str, Any]]) -> Asker:
        """A role's model to ask: its client, or a chain of them (kora.llm.chain)."""
        return as_asker(self.clients(params))

    def target(self, params: dict[str, Any]) -> Target:
        """The model under test: an LLM called directly, or a deployed chat service."""
        return open_target(params["name"], self.settings.model(params), self.shared)

    async def aclose(self) -> None:
        # LLM clients share the pool's providers (closed with the pool); a chat endpoint's
        # HTTP client belongs to its job
        await self.shared.aclose()
