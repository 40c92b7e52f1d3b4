"""Calls ahead of the jobs that need them, so a local run works at the provider's limit.

`snakemake --cores 10` runs ten jobs at a time, and a shard job has only a handful of
items: scenarios of three seeds, say, keep three chains of calls going. Ten such jobs
leave a provider that allows forty requests a second mostly idle. So the run's broker,
given every shard job the run will execute (their specs, built in `onstart` exactly as
the jobs' scripts build them), works through them item by item as far as each item goes:
a seed's expansion starts as soon as its seed call returns, a scenario's conversations as
soon as it validates, a conversation's judgments as soon as it ends. The limiter (shared
with the jobs) keeps the calls within the provider's limits.

Nothing is written but the call store: each Snakemake job still runs, in its turn, and
finds its calls answered (or, while one is still in flight, waits for it: kora.llm.ledger).
The calls are the jobs' own: the same stage functions, the same params, the records
passed on exactly as the files hand them over (a round trip through JSON), so each request
is byte for byte the one the job makes. A call made ahead is counted as paid by the job
that asks for it, so usage.json and the status files are as without prefetching.

A chain that fails stops; its job meets the same failure and records or reports it as
usual. An error that would fail every call (a rejected key) stops the prefetching.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel

from kora import benchmarks
from kora.benchmarks.base import Benchmark
from kora.benchmarks.outcomes import Conversation, Message
from kora.benchmarks.schemas import Scenario, ScenarioSeed
from kora.benchmarks.templates import prompts_from
from kora.errors import KoraError
from kora.llm.registry import kind_of
from kora.run.context import JobContext, Pool, Transport
from kora.run.jobs import is_fatal
from kora.run.shards import read_shard

log = logging.getLogger("kora.run.prefetch")
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

# steps (each a few dependent calls) in flight at once: enough to keep a fast provider
# busy at its limit with slow answers; the limiter paces them
STEPS_IN_FLIGHT = 512


def _as_read(record: Any, model: type[M]) -> M:
    """A record as the next job reads it from the shard file its job writes."""
    raw = record.shard_record() if isinstance(record, Scenario) else record
    data = (
        raw.model_dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(raw, BaseModel)
        else raw
    )
    return model.model_validate(orjson.loads(orjson.dumps(data)))


@dataclass
class _Job:
    spec: dict[str, Any]
    ctx: JobContext

    @property
    def params(self) -> dict[str, Any]:
        return self.spec["params"]  # type: ignore[no-any-return]

    @property
    def input(self) -> dict[str, Any]:
        return self.spec["input"]  # type: ignore[no-any-return]

    @property
    def benchmark(self) -> Benchmark:
        return benchmarks.get(self.spec["params"]["benchmark"])

    @property
    def prompts_dir(self) -> Path:
        return Path(self.input["prompts"][0]).parent


@dataclass
class Prefetch:
    """The run's shard jobs, grouped by grid cell, worked through item by item."""

    pool: Pool
    seeds: dict[str, _Job] = field(default_factory=dict)
    scenarios: dict[str, _Job] = field(default_factory=dict)
    conversations: dict[str, list[_Job]] = field(default_factory=lambda: defaultdict(list))
    # conversations carried on from recordings (`kora continue`), not made from scenarios
    continued: dict[str, list[_Job]] = field(default_factory=lambda: defaultdict(list))
    judgments: dict[tuple[str, str], _Job] = field(default_factory=dict)
    steps: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(STEPS_IN_FLIGHT))
    stopped: BaseException | None = None
    done: int = 0
    failed: int = 0

    @classmethod
    def of(cls, specs: list[dict[str, Any]], pool: Pool) -> Prefetch:
        run = cls(pool)
        for spec in specs:
            ctx = JobContext(pool, Transport(**spec["transport"]), ahead=True)
            job = _Job(spec, ctx)
            p = spec["params"]
            cell = "{risk}/{age}/{motivation}".format(**p["cell"])
            rule = spec["rule"]
            if rule == "seeds":
                run.seeds[cell] = job
            elif rule == "scenarios":
                run.scenarios[cell] = job
            elif rule == "conversations" and "recorded" in spec["input"]:
                run.continued[cell].append(job)
            elif rule == "conversations":
                run.conversations[cell].append(job)
            elif rule == "judgments":
                run.judgments[(p["target"], cell)] = job
        return run

    def _jobs(self) -> list[_Job]:
        return [
            *self.seeds.values(),
            *self.scenarios.values(),
            *(j for js in self.conversations.values() for j in js),
            *(j for js in self.continued.values() for j in js),
            *self.judgments.values(),
        ]

    async def run(self) -> None:
        cells = {*self.seeds, *self.scenarios, *self.conversations, *self.continued}
        cells |= {cell for _, cell in self.judgments}
        await asyncio.gather(*(self._cell(c) for c in sorted(cells)))
        log.info("made ahead: %d steps done, %d stopped", self.done, self.failed)

    async def _step(self, job: _Job, work: Callable[[], Awaitable[T]]) -> T | None:
        """One stage function of one item, under the job's prompts; None if it failed."""
        if self.stopped is not None:
            return None
        async with self.steps:
            try:
                with prompts_from(job.prompts_dir):
                    result = await work()
            except Exception as exc:
                self.failed += 1
                if is_fatal(exc):
                    self.stopped = exc
                    log.error("stopped making calls ahead: %s", exc)
                else:
                    log.info(
                        "%s: left to its job: %s: %s", job.spec["rule"], type(exc).__name__, exc
                    )
                return None
        self.done += 1
        return result

    async def _cell(self, cell: str) -> None:
        from kora.benchmarks.seedplan import parse_orders
        from kora.benchmarks.taxonomy import Shard
        from kora.run.stages.seeds import generate_seeds, seed_calls

        seeds: list[ScenarioSeed] | None = None
        if (job := self.seeds.get(cell)) is not None:
            taxonomy = self._taxonomy(job)
            p = job.params
            shard = Shard.of_cell(taxonomy, cell)
            client = job.ctx.asker(p["model"])
            orders = p.get("orders")
            calls = seed_calls(None if orders is None else parse_orders(orders, cell))
            made = await asyncio.gather(*(
                self._step(job, lambda c=c: generate_seeds(        # type: ignore[misc]
                    shard, taxonomy, job.benchmark, client, p["seeds_per_task"], c))
                for c in calls
            ))  # fmt: skip
            seeds = (
                None
                if any(m is None for m in made)
                else [_as_read(s, ScenarioSeed) for m in made for s in m or []]
            )
        elif (job := self.scenarios.get(cell)) is not None:
            seeds = _read(job.input["seeds"], ScenarioSeed)
        if cell in self.scenarios and seeds is not None:
            await asyncio.gather(*(self._seed(cell, seed) for seed in seeds))
        elif cell not in self.scenarios:
            scenarios = self._existing_scenarios(cell)
            await asyncio.gather(*(self._scenario(cell, s) for s in scenarios))
        await asyncio.gather(*(self._continue(cell, job) for job in self.continued.get(cell, [])))
        for (_, c), job in self.judgments.items():
            made_here = [*self.conversations.get(cell, []), *self.continued.get(cell, [])]
            if c == cell and not any(j.params["target"] == job.params["target"] for j in made_here):
                recorded = _read(job.input["conversations"], Conversation)
                await asyncio.gather(*(self._judge(cell, conv) for conv in recorded))

    def _existing_scenarios(self, cell: str) -> list[Scenario]:
        for job in self.conversations.get(cell, []):
            return _read(job.input["scenarios"], Scenario)
        return []

    async def _seed(self, cell: str, seed: ScenarioSeed) -> None:
        from kora.run.stages.expand import expand_with_fallback

        job = self.scenarios[cell]
        taxonomy = self._taxonomy(job)
        expanders = job.ctx.clients(job.params["expand_model"])
        user = job.ctx.asker(job.params["user_model"])
        scenario = await self._step(
            job, lambda: expand_with_fallback(seed, taxonomy, job.benchmark, expanders, user)
        )
        if scenario is not None:
            await self._scenario(cell, _as_read(scenario, Scenario))

    async def _test(
        self,
        cell: str,
        job: _Job,
        scenario: Scenario,
        prompt: Any,
        start: list[Message] | None = None,
    ) -> None:
        """One test's conversation (a recording's, carried on from `start`), then judged."""
        from kora.run.stages.converse import converse

        p = job.params
        if kind_of(p["target_model"]["provider"]).is_service:
            # a chat service's replies are not stored (a stateful service could not
            # replay them): a conversation made ahead would be made again by its job
            return
        taxonomy = self._taxonomy(job)
        target, user = job.ctx.target(p["target_model"]), job.ctx.asker(p["user_model"])
        conv = await self._step(
            job, lambda: converse(scenario, prompt, p["target"], target, user, taxonomy, start)
        )
        if conv is not None:
            await self._judge(cell, _as_read(conv, Conversation))

    async def _scenario(self, cell: str, scenario: Scenario) -> None:
        await asyncio.gather(
            *(self._test(cell, job, scenario, prompt) for job in
              self.conversations.get(cell, []) for prompt in job.params["prompts"])
        )  # fmt: skip

    async def _continue(self, cell: str, job: _Job) -> None:
        """A continued target's recordings carried on, each then judged."""
        recorded = _read(job.input["recorded"], Conversation)
        await asyncio.gather(
            *(self._test(cell, job, r.scenario, r.prompt, r.messages) for r in recorded
              if r.prompt in job.params["prompts"])
        )  # fmt: skip

    async def _judge(self, cell: str, conversation: Conversation) -> None:
        job = self.judgments.get((conversation.target, cell))
        if job is None or conversation.error is not None:
            return
        judges = [job.ctx.client(j) for j in job.params["judges"]]
        taxonomy = self._taxonomy(job)
        await self._step(job, lambda: job.benchmark.judge(conversation, judges, taxonomy))

    def _taxonomy(self, job: _Job) -> Any:
        return self.pool.taxonomy([Path(f) for f in job.input["taxonomy"]], job.benchmark)

    async def aclose(self) -> None:
        for job in self._jobs():
            await job.ctx.aclose()


def _read(path: str, model: type[M]) -> list[M]:
    """A shard that exists (its job is not part of this run), or nothing."""
    try:
        return read_shard(path, model)
    except (OSError, KoraError):
        return []
