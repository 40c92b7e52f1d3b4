"""One typed entry point per Snakemake rule: `seeds(input, output, params, ctx)` and so on.

Each reads exactly its rule's declared input, output and params (validated here into the
classes below) and nothing else of the run: the params carry every model setting that
changes a result, the taxonomy and templates are declared input files. The run-wide
settings that only carry calls (rate limits, keys, the call store's folder) reach a job as
its `JobContext` (kora.run.context).

`execute(spec, pool)` runs one job from its spec (what kora.run.dispatch sends from the
rule's script: the rule name and its input, output, params and log), in the run's broker
or in the job's own process (`run_here`), and returns the job's exit status and what it
has to say.

Longer than most modules here (about 450 lines) because it is the one page a reader
needs to see what every rule's job receives and does: seven small entry points and their
input/output/params classes, which would read worse spread over seven files.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from kora import benchmarks
from kora.analysis.results import ResultsMeta
from kora.benchmarks.base import Benchmark
from kora.benchmarks.schemas import AgeRange, PromptVariant
from kora.benchmarks.seedplan import SeedOrder
from kora.benchmarks.taxonomy import Shard, Taxonomy
from kora.benchmarks.templates import prompts_from
from kora.errors import KoraError
from kora.io import describe, write_atomic, write_json
from kora.llm.base import BlockedError
from kora.run.context import JobContext, Pool, Transport
from kora.run.joblog import job_log
from kora.run.jobs import FatalProviderError, ShardJob, run_shard_job

log = logging.getLogger("kora")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


# a role's model as a rule param (KoraConfig.role_params): one, or a fallback chain
RoleParams = dict[str, Any] | list[dict[str, Any]]


class Cell(_Spec):
    """The grid cell of a shard (its wildcards, as a param)."""

    risk: str
    age: AgeRange
    motivation: str

    def shard(self, taxonomy: Taxonomy) -> Shard:
        return Shard(taxonomy.category_of(self.risk).id, self.risk, self.age, self.motivation)

    @property
    def path(self) -> str:
        return f"{self.risk}/{self.age}/{self.motivation}"


class Sources(_Spec):
    """Input files every shard rule declares: the templates it renders, the taxonomy."""

    prompts: list[Path]
    taxonomy: list[Path]

    def taxonomy_of(self, ctx: JobContext, benchmark: Benchmark) -> Taxonomy:
        return ctx.pool.taxonomy(self.taxonomy, benchmark)

    @property
    def prompts_dir(self) -> Path:
        return self.prompts[0].parent


class ShardOutput(_Spec):
    data: Path
    status: Path


# --- seeds ----------------------------------------------------------------------------


class SeedsParams(_Spec):
    benchmark: str
    cell: Cell
    model: RoleParams
    seeds_per_task: int
    retry: str
    # KORA v2 with `total_seeds`: the shard's planned seed calls (kora.benchmarks.v2.plan)
    orders: list[SeedOrder] | None = None


async def seeds(input: Sources, output: ShardOutput, params: SeedsParams, ctx: JobContext) -> int:
    from kora.run.stages.seeds import SeedCall, generate_seeds, seed_calls

    bm = benchmarks.get(params.benchmark)
    taxonomy = input.taxonomy_of(ctx, bm)
    shard = params.cell.shard(taxonomy)
    client = ctx.asker(params.model)
    job = ShardJob("seeds", params.cell.path, output.data, params.retry, {"seed": params.model})

    async def work(call: SeedCall) -> list[Any]:
        return await generate_seeds(shard, taxonomy, bm, client, params.seeds_per_task, call)

    def label(call: SeedCall) -> str:
        return shard.path if call[0] is None else f"{shard.path} seed {call[0] + 1}"

    calls = seed_calls(params.orders)
    results = await run_shard_job(job, ctx, calls, work, label=label)
    return job.write(ctx, [s for r in results if not isinstance(r, BaseException) for s in r])


# --- scenarios ------------------------------------------------------------------------


class ScenariosInput(Sources):
    seeds: Path


class ScenariosOutput(ShardOutput):
    rejected: Path


class ScenariosParams(_Spec):
    benchmark: str
    cell: Cell
    expand_model: RoleParams
    user_model: RoleParams
    retry: str


async def scenarios(
    input: ScenariosInput, output: ScenariosOutput, params: ScenariosParams, ctx: JobContext
) -> int:
    from kora.benchmarks.schemas import RejectedScenario, Scenario, ScenarioSeed
    from kora.run.shards import read_shard
    from kora.run.stages.expand import (
        ScenarioValidationError,
        expand_with_fallback,
        rejected_record,
    )

    bm = benchmarks.get(params.benchmark)
    taxonomy = input.taxonomy_of(ctx, bm)
    models = {"expand": params.expand_model, "user": params.user_model}
    job = ShardJob("scenarios", params.cell.path, output.data, params.retry, models)
    expanders, user = ctx.clients(params.expand_model), ctx.asker(params.user_model)

    async def work(seed: ScenarioSeed) -> Scenario | RejectedScenario:
        try:
            return await expand_with_fallback(seed, taxonomy, bm, expanders, user)
        except ScenarioValidationError as exc:
            log.warning("%s", exc)
            return rejected_record(exc)

    seeds = read_shard(input.seeds, ScenarioSeed)
    results = await run_shard_job(job, ctx, seeds, work, label=lambda s: f"seed {s.id}")
    done = [r.shard_record() for r in results if isinstance(r, Scenario)]
    rejected = [r for r in results if isinstance(r, RejectedScenario)]
    return job.write(ctx, done, {output.rejected: rejected})


# --- conversations --------------------------------------------------------------------


class ConversationsInput(Sources):
    # one of the two: the cell's scenarios, or a continued target's recordings
    scenarios: Path | None = None
    recorded: Path | None = None


class ConversationsParams(_Spec):
    benchmark: str
    cell: Cell
    target: str
    target_model: dict[str, Any]
    prompts: list[PromptVariant]
    user_model: RoleParams
    scenarios: str  # which scenario set (generated or an import): a switch re-runs the job
    retry: str


async def conversations(
    input: ConversationsInput,
    output: ShardOutput,
    params: ConversationsParams,
    ctx: JobContext,
) -> int:
    from kora.benchmarks.outcomes import Conversation, Message
    from kora.benchmarks.schemas import Scenario
    from kora.benchmarks.testkeys import TestKey
    from kora.run.shards import read_shard
    from kora.run.stages.converse import converse

    taxonomy = input.taxonomy_of(ctx, benchmarks.get(params.benchmark))
    models = {"target": params.target_model, "user": params.user_model}
    job = ShardJob(
        "conversations", f"{params.target}/{params.cell.path}", output.data, params.retry, models
    )
    target, user = ctx.target(params.target_model), ctx.asker(params.user_model)
    # (scenario, prompt, recorded messages to carry on or None)
    tests: list[tuple[Scenario, PromptVariant, list[Message] | None]]
    if input.recorded is not None:
        recorded = read_shard(input.recorded, Conversation)
        tests = [(r.scenario, r.prompt, r.messages) for r in recorded if r.prompt in params.prompts]
    else:
        assert input.scenarios is not None
        scenarios = read_shard(input.scenarios, Scenario)
        tests = [(s, p, None) for s in scenarios for p in params.prompts]

    async def work(test: tuple[Scenario, PromptVariant, list[Message] | None]) -> Conversation:
        scenario, prompt, start = test
        return await converse(scenario, prompt, params.target, target, user, taxonomy, start)

    results = await run_shard_job(job, ctx, tests, work, label=lambda t: f"{t[0].id}:{t[1]}")
    records = [
        Conversation(
            key=str(TestKey.of(scenario, prompt)),
            target=params.target,
            prompt=prompt,
            scenario=scenario,
            error=f"{type(r).__name__}: {r}",
            blocked=r.reason if isinstance(r, BlockedError) else None,
        )
        if isinstance(r, BaseException)
        else r
        for (scenario, prompt, _), r in zip(tests, results, strict=True)
    ]
    return job.write(ctx, records)


# --- judgments ------------------------------------------------------------------------


class JudgmentsInput(Sources):
    conversations: Path


class JudgmentsParams(_Spec):
    benchmark: str
    cell: Cell
    target: str
    judges: list[dict[str, Any]]
    retry: str


async def judgments(
    input: JudgmentsInput, output: ShardOutput, params: JudgmentsParams, ctx: JobContext
) -> int:
    from kora.benchmarks.outcomes import Conversation, Judgment
    from kora.run.shards import read_shard

    bm = benchmarks.get(params.benchmark)
    taxonomy = input.taxonomy_of(ctx, bm)
    job = ShardJob(
        "judgments",
        f"{params.target}/{params.cell.path}",
        output.data,
        params.retry,
        {"judges": params.judges},
    )
    judges = [ctx.client(j) for j in params.judges]
    conversations = read_shard(input.conversations, Conversation)
    # a conversation that failed upstream is carried as a failed judgment, not re-judged
    todo = [c for c in conversations if c.error is None]

    async def work(c: Conversation) -> Judgment:
        return await bm.judge(c, judges, taxonomy)

    results = dict(
        zip(
            (c.key for c in todo),
            await run_shard_job(job, ctx, todo, work, label=lambda c: c.key),
            strict=True,
        )
    )
    records = []
    for c in conversations:
        r = results.get(c.key)
        if r is None or isinstance(r, BaseException):
            error = f"conversation failed: {c.error}" if r is None else f"{type(r).__name__}: {r}"
            r = Judgment(key=c.key, target=c.target, scenario=c.scenario, prompt=c.prompt,
                         messages=c.messages, turns=c.turns, error=error,
                         blocked=c.blocked, recordedTurns=c.recordedTurns)  # fmt: skip
        records.append(r)
    return job.write(ctx, records)


# --- results, report, leaderboard -----------------------------------------------------


class ResultsInput(_Spec):
    judgments: list[Path]
    judgments_status: list[Path]
    conversations: list[Path]
    conversations_status: list[Path]
    scenarios: list[Path] = []
    scenarios_status: list[Path] = []
    rejected: list[Path] = []
    seeds: list[Path] = []
    seeds_status: list[Path] = []
    taxonomy: list[Path]


class ResultsOutput(_Spec):
    results: Path
    usage: Path


class ResultsParams(_Spec):
    meta: ResultsMeta
    retry: str


async def results(
    input: ResultsInput, output: ResultsOutput, params: ResultsParams, ctx: JobContext
) -> int:
    from kora.analysis.results import build_results
    from kora.io import iter_jsonl
    from kora.run.shards import check

    data = [*input.judgments, *input.conversations, *input.scenarios, *input.rejected]
    for f in [*data, *input.seeds]:
        check(f)  # raises naming a damaged shard
    status = [
        *input.judgments_status,
        *input.conversations_status,
        *input.scenarios_status,
        *input.seeds_status,
    ]
    rejected = sum(1 for f in input.rejected for _ in iter_jsonl(f))
    taxonomy = Sources(prompts=[], taxonomy=input.taxonomy).taxonomy_of(
        ctx, benchmarks.get(params.meta.benchmark)
    )
    doc, usage = build_results(params.meta, taxonomy, input.judgments, status, rejected)
    write_json(output.results, doc)
    write_json(output.usage, usage)
    log.info(
        "%s: %d tests in %d groups, %d failed; %s",
        params.meta.target, doc["tests"], len(doc["scores"]), doc["failedTests"], usage["total"],
    )  # fmt: skip
    return 0


class ReportInput(_Spec):
    judgments: list[Path]
    results: Path
    taxonomy: list[Path]
    agreement: list[Path] = []  # what `kora agreement` wrote, once it has run


class ReportOutput(_Spec):
    html: Path
    summary: Path


class ReportParams(_Spec):
    target: str


async def report(
    input: ReportInput, output: ReportOutput, params: ReportParams, ctx: JobContext
) -> int:
    from kora.analysis.records import load_records
    from kora.analysis.report.pages import write_report

    started = time.monotonic()
    doc = orjson.loads(input.results.read_bytes())
    taxonomy = Sources(prompts=[], taxonomy=input.taxonomy).taxonomy_of(
        ctx, benchmarks.of_results(doc)
    )
    records = load_records(input.judgments)
    agreement = orjson.loads(input.agreement[0].read_bytes()) if input.agreement else None
    summary = write_report(records, doc, output.html, output.summary, taxonomy, agreement)
    log.info(
        "%s: report of %d tests (%d failed) in %.1f s",
        params.target, summary["tests"], summary["errors"], time.monotonic() - started,
    )  # fmt: skip
    return 0


class LeaderboardInput(_Spec):
    results: list[Path]
    judgments: list[Path]
    taxonomy: list[Path]


class LeaderboardOutput(_Spec):
    html: Path
    data: Path  # leaderboard.json


class LeaderboardParams(_Spec):
    # each target's judgment shards (the input lists them all, flat)
    judgments: dict[str, list[Path]]


async def leaderboard(
    input: LeaderboardInput, output: LeaderboardOutput, params: LeaderboardParams, ctx: JobContext
) -> int:
    from kora.analysis.records import load_records
    from kora.analysis.report.leaderboard import build_leaderboard
    from kora.analysis.report.pages import render_leaderboard

    entries = {}
    for f in input.results:
        res = orjson.loads(f.read_bytes())
        entries[str(res["target"])] = res
    records = {t: load_records(files) for t, files in params.judgments.items() if files}
    bm = next(map(benchmarks.of_results, entries.values()), benchmarks.get(benchmarks.DEFAULT))
    taxonomy = Sources(prompts=[], taxonomy=input.taxonomy).taxonomy_of(ctx, bm)
    doc = build_leaderboard(entries, records, taxonomy=taxonomy)
    write_atomic(output.html, render_leaderboard(doc, taxonomy).encode())
    write_json(output.data, doc)
    log.info("leaderboard of %d targets, %d pairs", len(doc["targets"]), len(doc["pairs"]))
    return 0


# --- dispatch -------------------------------------------------------------------------

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)
Par = TypeVar("Par", bound=BaseModel)


@dataclass(frozen=True)
class Entry(Generic[In, Out, Par]):
    input: type[In]
    output: type[Out]
    params: type[Par]
    run: Callable[[In, Out, Par, JobContext], Awaitable[int]]


ENTRIES: dict[str, Entry[Any, Any, Any]] = {
    "seeds": Entry(Sources, ShardOutput, SeedsParams, seeds),
    "scenarios": Entry(ScenariosInput, ScenariosOutput, ScenariosParams, scenarios),
    "conversations": Entry(ConversationsInput, ShardOutput, ConversationsParams, conversations),
    "judgments": Entry(JudgmentsInput, ShardOutput, JudgmentsParams, judgments),
    "results": Entry(ResultsInput, ResultsOutput, ResultsParams, results),
    "report": Entry(ReportInput, ReportOutput, ReportParams, report),
    "leaderboard": Entry(LeaderboardInput, LeaderboardOutput, LeaderboardParams, leaderboard),
}


@dataclass(frozen=True)
class Outcome:
    """A job's exit status and what it tells the user (its stderr)."""

    status: int
    message: str = ""


async def execute(spec: dict[str, Any], pool: Pool, where: str = "its own") -> Outcome:
    """Run one job from its spec; errors a user can act on become a message, not a
    traceback (anything else is a bug and propagates)."""
    rule = spec["rule"]
    entry = ENTRIES[rule]
    logs = spec.get("log") or []
    with job_log(logs[0] if logs else None):
        started = time.monotonic()
        try:
            args = (
                entry.input.model_validate(spec["input"]),
                entry.output.model_validate(spec["output"]),
                entry.params.model_validate(spec["params"]),
            )
        except ValidationError as exc:
            raise ValueError(f"rule {rule}: its job spec does not match: {describe(exc)}") from None
        ctx = JobContext(pool, Transport(**spec["transport"]))
        log.info("%s job in process %d (%s)", rule, os.getpid(), where)
        try:
            prompts = getattr(args[0], "prompts", None)
            with prompts_from(prompts[0].parent if prompts else None):
                status = await entry.run(*args, ctx)
        except (FatalProviderError, KoraError) as exc:
            log.error("stopped: %s", exc)
            return Outcome(1, f"kora: {rule} job stopped: {exc}")
        except OSError as exc:  # a full disk, say: every file is whole or not there
            where = f"{exc.filename}: " if exc.filename else ""
            log.error("stopped: %s%s", where, exc.strerror or exc)
            return Outcome(1, f"kora: {rule} job stopped: {where}{exc.strerror or exc}")
        finally:
            await ctx.aclose()
        log.info("finished in %.1f s", time.monotonic() - started)
        return Outcome(status)


def run_here(spec: dict[str, Any]) -> tuple[int, str]:
    """Run one job in this process (no broker serves it): its exit status and message."""

    async def main() -> tuple[int, str]:
        pool = Pool(Path.cwd())
        try:
            outcome = await execute(spec, pool)
        finally:
            await pool.aclose()
        return outcome.status, outcome.message

    return asyncio.run(main())
