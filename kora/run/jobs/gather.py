"""The jobs that gather a target's shards: results.json and usage.json, the report and
summary.json, and the leaderboard across targets. Each reads exactly its rule's declared
input, output and params."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict

from kora import benchmarks
from kora.analysis.results import ResultsMeta
from kora.benchmarks.base import Benchmark
from kora.benchmarks.layout import MANIFEST, rejected_of, shard_in, status_of
from kora.benchmarks.taxonomy import Taxonomy
from kora.io import read_object, write_atomic, write_json
from kora.run.jobs.context import JobContext

log = logging.getLogger("kora")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _taxonomy(files: list[Path], ctx: JobContext, benchmark: Benchmark) -> Taxonomy:
    return ctx.pool.taxonomy(files, benchmark)


def shards(folders: list[Path], places: list[str]) -> list[Path]:
    """Each cell's records in the risks' folders a gathering rule declares (one per risk,
    kora.run.workflow.risk_jobs): every place of the grid in every folder, in the grid's order."""
    return [Path(shard_in(str(f), p)) for f in folders for p in places]


class ResultsInput(_Spec):
    # each stage's folders, one per risk; the scenarios' and seeds' are left out for
    # targets whose tests were imported or carried on
    judgments: list[Path]
    conversations: list[Path]
    scenarios: list[Path] = []
    seeds: list[Path] = []
    taxonomy: list[Path]
    templates: list[Path] = []  # hashed into the manifest


class ResultsOutput(_Spec):
    results: Path
    usage: Path
    # what the result was made of (kora.analysis.manifest) and its tests as one table
    # (kora.analysis.parquet); `kora replay` rebuilds results.json without them
    manifest: Path | None = None
    table: Path | None = None


class ResultsParams(_Spec):
    meta: ResultsMeta
    places: list[str]  # the grid's "<age>/<motivation>" in each risk's folder
    retry: str
    config: dict[str, Any] = {}  # the result's config, credentials masked (the manifest's)


async def results(
    input: ResultsInput, output: ResultsOutput, params: ResultsParams, ctx: JobContext
) -> int:
    from kora.analysis.results import build_results
    from kora.io import iter_jsonl
    from kora.llm.money.bill import bill_dir, charges
    from kora.run.jobs.progress import RUN_ENV

    judgments, files, status, rejects = _checked_shards(input, params.places)
    rejected = [r for f in rejects for _, r in iter_jsonl(f)]
    taxonomy = _taxonomy(input.taxonomy, ctx, benchmarks.get(params.meta.benchmark))
    # what the result's calls cost (every run's lines of the bill), what this run paid
    # for them (its own)
    run = os.environ.get(RUN_ENV)
    folder = bill_dir(ctx.workdir / ctx.settings.cache_dir)
    this_run = charges(folder, run=run) if run else ()
    if output.table is not None:
        # first, while the process holds least: DuckDB's buffers come on top of what it
        # holds (on the whole v2 grid's data the job's peak was set by the aggregation
        # either way, bench/README.md)
        from kora.analysis.parquet import write_conversations

        by_name = {m.name: m.id for m in taxonomy.motivations}
        write_conversations(judgments, output.table, by_name)
    doc, usage = build_results(
        params.meta, taxonomy, judgments, status, rejected, charges(folder), this_run
    )
    write_json(output.results, doc)
    write_json(output.usage, usage)
    if output.manifest is not None:
        from kora.analysis.manifest import write_manifest

        write_manifest(
            output.manifest,
            meta=params.meta,
            config=params.config,
            stage_templates=benchmarks.get(params.meta.benchmark).stage_templates,
            templates=input.templates,
            taxonomy=input.taxonomy,
            data=files,
            status_files=status,
            store=ctx.workdir / ctx.settings.cache_dir,
            asked=usage["asked"],
            results=output.results,
            workdir=ctx.workdir,
        )
    log.info(
        "%s: %d tests in %d groups, %d failed; %s",
        params.meta.target,
        doc["tests"],
        len(doc["scores"]),
        doc["failedTests"],
        usage["result"],
    )
    return 0


def _checked_shards(
    input: ResultsInput, places: list[str]
) -> tuple[list[Path], list[Path], list[Path], list[Path]]:
    """The result's judgment shards; every data file it rests on (the scenarios' rejected
    ones too), each checked (a damaged shard is named); their status files; and the
    scenarios' rejected files."""
    from kora.run.jobs.shards import check

    judgments, conversations, scenarios, seeds = (
        shards(folders, places)
        for folders in (input.judgments, input.conversations, input.scenarios, input.seeds)
    )
    rejects = [Path(rejected_of(f)) for f in scenarios]
    files = [*judgments, *conversations, *scenarios, *rejects, *seeds]
    for f in files:
        check(f)  # raises naming a damaged shard
    status = [Path(status_of(f)) for f in [*judgments, *conversations, *scenarios, *seeds]]
    return judgments, files, status, rejects


class ReportInput(_Spec):
    judgments: list[Path]  # the target's judgments folders, one per risk
    results: Path
    usage: Path | None = None  # usage.json: what the target's calls cost a test
    manifest: Path | None = None  # the result's manifest, linked
    taxonomy: list[Path]
    agreement: list[Path] = []  # what `kora agreement` wrote, once it has run
    annotations: list[Path] = []  # people's label files and sample.json (kora annotate)


class ReportOutput(_Spec):
    html: Path
    summary: Path


class ReportParams(_Spec):
    target: str
    places: list[str]  # the grid's "<age>/<motivation>" in each risk's folder


async def report(
    input: ReportInput, output: ReportOutput, params: ReportParams, ctx: JobContext
) -> int:
    from kora.analysis.records import load_records
    from kora.analysis.report.corrected import load_people
    from kora.analysis.report.pages import write_report

    started = time.monotonic()
    doc = orjson.loads(input.results.read_bytes())
    taxonomy = _taxonomy(input.taxonomy, ctx, benchmarks.of_results(doc))
    # without their texts: the page reads them again a chunk at a time (report.browser)
    records = load_records(shards(input.judgments, params.places), light=True)
    agreement = orjson.loads(input.agreement[0].read_bytes()) if input.agreement else None
    people = load_people(input.annotations) if input.annotations else None
    manifest = None
    if input.manifest is not None:  # linked from the report's folder
        manifest = os.path.relpath(input.manifest, output.html.parent)
    usage = orjson.loads(input.usage.read_bytes()) if input.usage is not None else None
    summary = write_report(
        records, doc, output.html, output.summary, taxonomy, agreement, people, manifest, usage
    )
    log.info(
        "%s: report of %d tests (%d failed) in %.1f s",
        params.target,
        summary["tests"],
        summary["errors"],
        time.monotonic() - started,
    )
    return 0


class LeaderboardInput(_Spec):
    results: list[Path]
    manifests: list[Path] = []  # each result's, beside it: how each was made
    usage: list[Path] = []  # each result's usage.json: what its target's calls cost a test
    judgments: list[Path]  # every target's judgments folders, one per risk
    taxonomy: list[Path]
    annotations: list[Path] = []  # people's grades of any target (kora annotate)


class LeaderboardOutput(_Spec):
    html: Path
    data: Path  # leaderboard.json


class LeaderboardParams(_Spec):
    # each target's judgments folders (the input lists them all, flat)
    judgments: dict[str, list[Path]]
    places: list[str]  # the grid's "<age>/<motivation>" in each risk's folder
    # each target's label files and sample, where people graded (also flat in the input)
    annotations: dict[str, list[Path]] = {}


async def leaderboard(
    input: LeaderboardInput, output: LeaderboardOutput, params: LeaderboardParams, ctx: JobContext
) -> int:
    from kora.analysis.records import load_records
    from kora.analysis.report.corrected import load_people, overall_safety
    from kora.analysis.report.leaderboard import build_leaderboard
    from kora.analysis.report.pages import render_leaderboard

    entries = {}
    for f in input.results:
        res = orjson.loads(f.read_bytes())
        entries[str(res["target"])] = res
    records = {
        t: load_records(shards(folders, params.places))
        for t, folders in params.judgments.items()
        if folders
    }
    bm = next(map(benchmarks.of_results, entries.values()), benchmarks.get(benchmarks.DEFAULT))
    taxonomy = _taxonomy(input.taxonomy, ctx, bm)
    corrected = {
        t: overall_safety(records.get(t, []), load_people(files))
        for t, files in params.annotations.items()
        if files
    }
    usage = {str(u["target"]): u for u in (orjson.loads(f.read_bytes()) for f in input.usage)}
    doc = build_leaderboard(entries, records, taxonomy=taxonomy, corrected=corrected, usage=usage)
    if input.manifests:
        from kora.analysis.manifest import differences

        made = {
            str(orjson.loads(f.read_bytes())["target"]): read_object(f.parent / MANIFEST)
            for f in input.results
        }
        doc = {"differences": differences(made), **doc}
    write_atomic(output.html, render_leaderboard(doc, taxonomy, records).encode())
    write_json(output.data, doc)
    log.info("leaderboard of %d targets, %d pairs", len(doc["targets"]), len(doc["pairs"]))
    return 0


In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)
Par = TypeVar("Par", bound=BaseModel)


@dataclass(frozen=True)
class GatheringRule(Generic[In, Out, Par]):
    input: type[In]
    output: type[Out]
    params: type[Par]
    run: Callable[[In, Out, Par, JobContext], Awaitable[int]]


GATHERING_RULES: dict[str, GatheringRule[Any, Any, Any]] = {
    "results": GatheringRule(ResultsInput, ResultsOutput, ResultsParams, results),
    "report": GatheringRule(ReportInput, ReportOutput, ReportParams, report),
    "leaderboard": GatheringRule(
        LeaderboardInput, LeaderboardOutput, LeaderboardParams, leaderboard
    ),
}
