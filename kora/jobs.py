"""One Snakemake job per shard and stage: read the shard, run its items, write the result.

Items of a shard run concurrently. An item that still fails after the retry layer is
recorded (with its error) and the rest of the shard completes. Every output is written to
a temp file and renamed. Beside each shard a `.status.json` records the calls, tokens,
cost and failures of the job; a `.retry` marker holds a token that changes whenever the
shard had failures, so the next run of the same command re-runs it (Snakemake sees its
`retry` param change) and pays only for the failed items: everything else is cached.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kora.errors import KoraError
from kora.io import write_json
from kora.llm.base import ProviderError
from kora.progress import ProgressReporter
from kora.runtime import Runtime
from kora.schemas import Conversation, Judgment, RejectedScenario, Scenario, ScenarioSeed
from kora.shards import check as check_shard
from kora.shards import keep_token, new_token, read_shard, write_records, write_status
from kora.stages.converse import converse
from kora.stages.expand import ScenarioValidationError, expand_seed, rejected_record
from kora.stages.judge import judge_conversation
from kora.stages.seeds import generate_seeds
from kora.taxonomy import Shard

log = logging.getLogger("kora")
T = TypeVar("T")
R = TypeVar("R")


class FatalProviderError(Exception):
    """An error that no retry and no other item can get past (a bad or missing key)."""


@dataclass
class JobReport:
    stage: str
    shard: str
    items: int = 0
    done: int = 0
    failed: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    # the models that made the shard, by role: `kora plan` tells stored shards from
    # shards another model made (which the next run re-makes)
    models: dict[str, Any] = field(default_factory=dict)


async def run_items(
    items: list[T],
    work: Callable[[T], Awaitable[R]],
    *,
    label: Callable[[T], str],
    concurrency: int,
    report: JobReport,
    progress: ProgressReporter,
) -> list[R | BaseException]:
    sem = asyncio.Semaphore(concurrency)
    report.items = len(items)

    async def one(item: T) -> R | BaseException:
        async with sem:
            try:
                result = await work(item)
            except Exception as exc:
                if isinstance(exc, ProviderError) and (
                    exc.status in (401, 403)
                    or exc.unreachable
                    or (exc.status is None and not exc.retryable)
                ):
                    # a rejected or missing key, or a service that cannot be reached, fails
                    # every item alike: stop the job now rather than record the same error
                    # for each of them
                    raise FatalProviderError(str(exc)) from None
                report.failed += 1
                report.errors.append({"item": label(item), "error": f"{type(exc).__name__}: {exc}"})
                log.error("%s failed: %s: %s", label(item), type(exc).__name__, exc)
                progress.update(report)
                return exc
            report.done += 1
            progress.update(report)
            return result

    return list(await asyncio.gather(*(one(i) for i in items)))


def _finish(
    rt: Runtime, report: JobReport, output: Path, token: str, files: dict[str, Any]
) -> None:
    """The status file after the data files; the retry token for the next run."""
    write_status(
        output,
        {
            "stage": report.stage,
            "shard": report.shard,
            "items": report.items,
            "done": report.done,
            "failed": report.failed,
            "errors": report.errors,
            "models": report.models,
            "usage": rt.usage.records(),
        },
        files,
    )
    # a fresh token when anything failed: the next run re-runs this shard
    if report.failed:
        new_token(output)
    else:
        keep_token(output, token)
    t = rt.usage.totals()
    log.info(
        "%s %s: %d/%d done, %d failed; %d calls (%d cached, %d failed), tokens in %d out %d, $%.4f",
        report.stage, report.shard, report.done, report.items, report.failed,
        t.calls, t.cached, t.failures, t.input_tokens, t.output_tokens, t.cost,
    )  # fmt: skip


async def seeds_job(rt: Runtime, shard: Shard, output: Path, token: str) -> JobReport:
    report = JobReport("seeds", shard.path, models=rt.config.stage_models("seeds"))
    progress = ProgressReporter(rt, report)
    client = rt.client(rt.config.seed_model)
    results = await run_items(
        [shard],
        lambda s: generate_seeds(s, rt.taxonomy, client, rt.config.grid.seeds_per_task),
        label=lambda s: s.path,
        concurrency=1,
        report=report,
        progress=progress,
    )
    seeds = [s for r in results if not isinstance(r, BaseException) for s in r]
    files = {output.name: write_records(output, seeds)}
    _finish(rt, report, output, token, files)
    progress.close()
    return report


async def scenarios_job(
    rt: Runtime,
    shard: Shard,
    seeds_path: Path,
    output: Path,
    rejected: Path,
    token: str,
) -> JobReport:
    report = JobReport("scenarios", shard.path, models=rt.config.stage_models("scenarios"))
    progress = ProgressReporter(rt, report)
    seeds = read_shard(seeds_path, ScenarioSeed)
    expander = rt.client(rt.config.expand_model)
    user = rt.client(rt.config.user_model)

    async def work(seed: ScenarioSeed) -> Scenario | RejectedScenario:
        try:
            return await expand_seed(seed, rt.taxonomy, expander, user)
        except ScenarioValidationError as exc:
            log.warning("%s", exc)
            return rejected_record(exc)

    results = await run_items(
        seeds,
        work,
        label=lambda s: f"seed {s.id}",
        concurrency=rt.config.concurrency,
        report=report,
        progress=progress,
    )
    files = {
        output.name: write_records(
            output, [r.shard_record() for r in results if isinstance(r, Scenario)]
        ),
        rejected.name: write_records(
            rejected, [r for r in results if isinstance(r, RejectedScenario)]
        ),
    }
    _finish(rt, report, output, token, files)
    progress.close()
    return report


async def conversations_job(
    rt: Runtime,
    target: str,
    shard: Shard,
    scenarios_path: Path,
    output: Path,
    token: str,
) -> JobReport:
    report = JobReport(
        "conversations",
        f"{target}/{shard.path}",
        models=rt.config.stage_models("conversations", target),
    )
    progress = ProgressReporter(rt, report)
    scenarios = read_shard(scenarios_path, Scenario)
    tgt = rt.target(target)
    user = rt.client(rt.config.user_model)
    tests = [(s, p) for s in scenarios for p in rt.config.target_prompts(target)]

    async def work(test: tuple[Scenario, Any]) -> Conversation:
        return await converse(test[0], test[1], target, tgt, user, rt.taxonomy)

    results = await run_items(
        tests,
        work,
        label=lambda t: f"{t[0].id}:{t[1]}",
        concurrency=rt.config.concurrency,
        report=report,
        progress=progress,
    )
    records = []
    for (scenario, prompt), r in zip(tests, results, strict=True):
        if isinstance(r, BaseException):
            from kora.keys import TestKey

            r = Conversation(
                key=str(TestKey.of(scenario, prompt)),
                target=target,
                prompt=prompt,
                scenario=scenario,
                error=f"{type(r).__name__}: {r}",
            )
        records.append(r)
    _finish(rt, report, output, token, {output.name: write_records(output, records)})
    progress.close()
    return report


async def judgments_job(
    rt: Runtime,
    target: str,
    shard: Shard,
    conversations_path: Path,
    output: Path,
    token: str,
) -> JobReport:
    report = JobReport(
        "judgments", f"{target}/{shard.path}", models=rt.config.stage_models("judgments")
    )
    progress = ProgressReporter(rt, report)
    conversations = read_shard(conversations_path, Conversation)
    judges = [rt.client(j) for j in rt.config.judges]
    # a conversation that failed upstream is carried as a failed judgment, not re-judged
    todo = [c for c in conversations if c.error is None]
    results = await run_items(
        todo,
        lambda c: judge_conversation(c, judges, rt.taxonomy),
        label=lambda c: c.key,
        concurrency=rt.config.concurrency,
        report=report,
        progress=progress,
    )
    by_key: dict[str, Judgment | BaseException] = {
        c.key: r for c, r in zip(todo, results, strict=True)
    }
    records = []
    for c in conversations:
        r = by_key.get(c.key)
        if r is None:
            r = Judgment(key=c.key, target=c.target, scenario=c.scenario, prompt=c.prompt,
                         messages=c.messages, turns=c.turns,
                         error=f"conversation failed: {c.error}")  # fmt: skip
        elif isinstance(r, BaseException):
            r = Judgment(key=c.key, target=c.target, scenario=c.scenario, prompt=c.prompt,
                         messages=c.messages, turns=c.turns,
                         error=f"{type(r).__name__}: {r}")  # fmt: skip
        records.append(r)
    _finish(rt, report, output, token, {output.name: write_records(output, records)})
    progress.close()
    return report


def setup_logging(log_path: str | None) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers = [logging.FileHandler(log_path, mode="w")]
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        handlers=handlers,
        force=True,
    )
    # httpx logs every request URL at INFO; keep job logs to what a user acts on
    logging.getLogger("httpx").setLevel(logging.WARNING)


def run_snakemake_job(smk: Any, stage: str) -> None:
    """Entry point of the thin scripts under scripts/ (Snakemake's `script:` directive)."""
    setup_logging(smk.log[0] if smk.log else None)
    started = time.monotonic()
    rt = Runtime.from_raw(dict(smk.config), workdir=Path.cwd())
    w = smk.wildcards
    shard = Shard(rt.taxonomy.category_of(w.risk).id, w.risk, w.age, w.motivation)
    token = str(smk.params.retry)
    out = Path(smk.output.data)

    async def main() -> JobReport:
        try:
            if stage == "seeds":
                return await seeds_job(rt, shard, out, token)
            if stage == "scenarios":
                return await scenarios_job(
                    rt, shard, Path(smk.input.seeds), out, Path(smk.output.rejected), token
                )
            if stage == "conversations":
                return await conversations_job(
                    rt, w.target, shard, Path(smk.input.scenarios), out, token
                )
            if stage == "judgments":
                return await judgments_job(
                    rt, w.target, shard, Path(smk.input.conversations), out, token
                )
            raise ValueError(f"unknown stage {stage!r}")
        finally:
            await rt.aclose()

    try:
        report = asyncio.run(main())
    except (FatalProviderError, KoraError) as exc:
        log.error("stopped: %s", exc)
        print(f"kora: {stage} job stopped: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    log.info("finished in %.1f s", time.monotonic() - started)
    if report.failed:
        log.warning(
            "%d of %d items failed; they are recorded in the shard and will be retried "
            "by the next run of the same command",
            report.failed,
            report.items,
        )


def run_results_job(smk: Any) -> None:
    """Aggregate a target's judgments into results.json and its usage into usage.json."""
    from kora.io import iter_jsonl
    from kora.results import build_results

    setup_logging(smk.log[0] if smk.log else None)
    rt = Runtime.from_raw(dict(smk.config), workdir=Path.cwd())
    target = smk.wildcards.target
    inputs = dict(smk.input.items())
    try:
        for kind, files in inputs.items():
            if not kind.endswith("_status"):
                for f in files:
                    check_shard(f)
    except KoraError as exc:
        log.error("stopped: %s", exc)
        print(f"kora: results job stopped: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    status = [f for kind, files in inputs.items() if kind.endswith("_status") for f in files]
    rejected = sum(1 for f in inputs.get("rejected", []) for _ in iter_jsonl(f))
    results, usage = build_results(
        rt.config,
        rt.taxonomy,
        target,
        list(smk.input.judgments),
        status,
        rejected_counts=rejected,
    )
    write_json(smk.output.results, results)
    write_json(smk.output.usage, usage)
    log.info(
        "%s: %d tests in %d groups, %d failed; %s",
        target,
        results["tests"],
        len(results["scores"]),
        results["failedTests"],
        usage["total"],
    )
