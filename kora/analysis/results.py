"""results.json for a target: the reference shape plus what a reader needs beside it."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict

from kora import benchmarks
from kora.benchmarks.schemas import PromptVariant
from kora.benchmarks.taxonomy import Taxonomy
from kora.config.schema import KoraConfig, chain
from kora.llm.bill import Charge
from kora.llm.registry import kind_of
from kora.llm.usage import Counts, rested_on

MOCK_NOTE = (
    "Made with the offline mock provider: these figures are placeholders produced without "
    "any model and measure nothing."
)
NAMED_REJECTS = 5  # rejected scenarios results.json names (the first in grid order)


def models_used(config: KoraConfig, target: str) -> dict[str, dict[str, Any]]:
    roles: dict[str, list[str]] = defaultdict(list)
    target_model = config.targets[target].model
    if target_model is not None:
        roles[target_model].append("target")
    for name in chain(config.user_model):
        roles[name].append("user")
    for j in config.judges:
        roles[j].append("judge")
    for name in chain(config.seed_model):
        roles[name].append("seeds")
    for name in chain(config.expand_model):
        roles[name].append("expand")
    out = {}
    for name, rs in roles.items():
        m = config.models[name]
        entry: dict[str, Any] = {"roles": rs, "provider": m.provider}
        if m.model:
            entry["model"] = m.model
        if m.is_service:
            entry["base_url"] = m.base_url
            if m.app:
                entry["app"] = m.app
        out[name] = entry
    return out


def read_status(files: Iterable[Path | str]) -> list[dict[str, Any]]:
    return list(iter_status(files))


def iter_status(files: Iterable[Path | str]) -> Iterator[dict[str, Any]]:
    """Each status file that can be read, one at a time."""
    for f in files:
        try:
            yield orjson.loads(Path(f).read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            continue


def sum_usage(statuses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls the jobs asked for, by model and kind: how many, answered from the call
    store, failed (their status files' `usage` rows)."""
    acc: dict[tuple[str, str], Counts] = defaultdict(Counts)
    for s in statuses:
        for u in s.get("usage", []):
            acc[(u["model"], u["stage"])] += Counts.from_dict(u)
    return [{"model": m, "stage": st, **a.as_dict()} for (m, st), a in sorted(acc.items())]


def _priced(c: Counts) -> dict[str, Any]:
    """A sum of paid calls, as usage.json says it."""
    d = c.as_dict()
    for k in ("cached", "failures", "unstored"):
        d.pop(k, None)
    return d


def usage_doc(
    target: str, statuses: list[dict[str, Any]], this_run: Iterable[Charge]
) -> dict[str, Any]:
    """usage.json: what the result cost (every call it rests on, once, paid in this run or
    an earlier one), what the run writing it paid for those calls (`this_run`: its bill),
    and the calls its jobs asked for."""
    rested: dict[str, tuple[str, str, Counts]] = {}
    for s in statuses:
        for key, used in rested_on(s.get("calls", [])).items():
            rested.setdefault(key, used)
    result: dict[tuple[str, str], Counts] = defaultdict(Counts)
    for model, stage, c in rested.values():
        result[(model, stage)] += c
    paid: dict[tuple[str, str], Counts] = defaultdict(Counts)
    for charge in this_run:
        if charge.key in rested:
            model, stage, _ = rested[charge.key]
            paid[(model, stage)] += charge.counts
    asked = {(u["model"], u["stage"]): u for u in sum_usage(statuses)}
    rows = []
    for model, stage in sorted(set(result) | set(asked)):
        a = asked.get((model, stage), {})
        rows.append(
            {
                "model": model,
                "stage": stage,
                **_priced(result[(model, stage)]),
                "paidThisRun": _priced(paid[(model, stage)]),
                "asked": a.get("calls", 0),
                "cached": a.get("cached", 0),
                "failures": a.get("failures", 0),
            }
        )
    by_stage: dict[str, float] = defaultdict(float)
    by_model: dict[str, float] = defaultdict(float)
    for (model, stage), c in result.items():
        by_stage[stage] += c.cost
        by_model[model] += c.cost
    jobs = sum((Counts.from_dict(u) for u in asked.values()), Counts())
    return {
        "target": target,
        "result": _priced(sum(result.values(), Counts())),
        "paidThisRun": _priced(sum(paid.values(), Counts())),
        "asked": {
            "calls": jobs.calls,
            "cached": jobs.cached,
            "failures": jobs.failures,
            # paid answers the call store could not keep (a full disk)
            **({"unstored": jobs.unstored} if jobs.unstored else {}),
        },
        "usage": rows,
        "costByStage": {k: round(v, 6) for k, v in sorted(by_stage.items())},
        "costByModel": {k: round(v, 6) for k, v in sorted(by_model.items())},
    }


def stage_failures(statuses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"stage": s["stage"], "shard": s["shard"], "failed": s["failed"], "errors": s["errors"][:5]}
        for s in statuses
        if s.get("failed")
    ]


def failure_summary(path: Path | str, max_errors: int = 3) -> str | None:
    """What a user must know about an incomplete results.json, or None when complete."""
    doc = orjson.loads(Path(path).read_bytes())
    if doc.get("complete", True):
        return None
    target = doc.get("target", "?")
    failed = int(doc.get("failedTests", 0))
    total = failed + int(doc.get("tests", 0))
    lines = []
    if failed:
        lines.append(f"{failed} of {total} tests of target {target!r} failed")
    # failed conversations and judgments are the failed tests; before them, say which
    stages = [s for s in doc.get("stageFailures", []) if s.get("stage") in ("seeds", "scenarios")]
    for stage in ("seeds", "scenarios"):
        n = sum(int(s.get("failed", 0)) for s in stages if s.get("stage") == stage)
        if n:
            lines.append(f"{n} {'seed calls' if stage == 'seeds' else 'expansions'} failed")
    errors = [g["example"] for g in doc.get("failed", []) if g.get("example")]
    errors += [e["error"] for s in stages for e in s.get("errors", []) if e.get("error")]
    seen: list[str] = []
    for e in errors:
        e = e.removeprefix("conversation failed: ")
        if e not in seen:
            seen.append(e)
    shown = os.path.relpath(path) if Path(path).is_absolute() else str(path)
    out = [f"{shown}: " + "; ".join(lines) + " (kept, marked incomplete)"]
    out += [f"  - {e[:300]}" for e in seen[:max_errors]]
    return "\n".join(out)


SKIPPED_REASON = (
    "the target is a deployed chat endpoint, which always receives an age: "
    "a no-age `default` baseline cannot be run against it"
)


class ResultsMeta(BaseModel):
    """What results.json says about the run besides its scores: the results rule's params."""

    model_config = ConfigDict(extra="forbid")
    benchmark: str
    target: str
    judges: list[str]
    user: str | list[str]  # a fallback chain as its list
    prompts: list[PromptVariant]
    skipped: list[PromptVariant]
    models: dict[str, dict[str, Any]]
    imported: bool
    continued: bool = False

    @classmethod
    def of(cls, config: KoraConfig, target: str) -> ResultsMeta:
        return cls(
            benchmark=config.benchmark,
            target=target,
            judges=list(config.judges),
            user=config.user_model,
            prompts=config.target_prompts(target),
            skipped=config.skipped_prompts(target),
            models=models_used(config, target),
            imported=config.targets[target].imported,
            continued=config.targets[target].continued,
        )


def build_results(
    meta: ResultsMeta,
    taxonomy: Taxonomy,
    judgment_files: Sequence[Path | str],
    status_files: Sequence[Path | str],
    rejected: Sequence[dict[str, Any]] = (),  # the .rejected.jsonl records
    this_run: Iterable[Charge] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(results.json, usage.json) documents for one target."""
    bm = benchmarks.get(meta.benchmark)
    scores, failed = bm.aggregate([Path(f) for f in judgment_files], taxonomy)
    bm.check_scores(scores)  # the version's results shape, or a bug of ours
    statuses = read_status(status_files)
    is_mock = any(kind_of(m["provider"]).offline for m in meta.models.values())
    target = meta.target
    results: dict[str, Any] = {
        **bm.stamp,
        "target": target,
        "judges": list(meta.judges),
        "user": meta.user,
        "prompts": list(meta.prompts),
        "scores": scores,
    }
    if len(meta.judges) == 1:
        results["judge"] = meta.judges[0]
    if meta.skipped:
        results["skippedPrompts"] = list(meta.skipped)
        results["skippedReason"] = SKIPPED_REASON
    results["models"] = meta.models
    if meta.imported:
        results["conversations"] = "imported"
    if meta.continued:
        results["conversations"] = "continued"
    results["tests"] = sum(s["sums"]["al"] for s in scores)
    results["failedTests"] = sum(f["failed"] for f in failed)
    results["failed"] = failed
    blocked: dict[str, int] = defaultdict(int)
    for f in failed:
        for reason, n in f.get("blocked", {}).items():
            blocked[reason] += n
    if blocked:  # tests a chat service would not let run, by the reason it gave
        results["blockedTests"] = dict(sorted(blocked.items()))
    results["stageFailures"] = stage_failures(statuses)
    results["rejectedScenarios"] = len(rejected)
    if rejected:
        results["rejectedFirst"] = [
            {
                "seedId": r["seed"]["id"],
                "riskId": r["seed"]["riskId"],
                "ageRange": r["seed"]["ageRange"],
                "reasons": r["lastReasons"],
            }
            for r in rejected[:NAMED_REJECTS]
        ]
    # a run with failed tests or stage items is readable but not finished: the same
    # command retries what failed
    results["complete"] = results["failedTests"] == 0 and not results["stageFailures"]
    if is_mock:
        results["mock"] = True
        results["note"] = MOCK_NOTE
    return results, usage_doc(target, statuses, this_run)
