"""results.json for a target: the reference shape plus what a reader needs beside it."""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict

from kora import benchmarks
from kora.benchmarks.schemas import PromptVariant
from kora.benchmarks.taxonomy import Taxonomy
from kora.config.schema import KoraConfig, chain
from kora.llm.money.bill import Charge
from kora.llm.money.usage import ASKED, Counts, asked_row
from kora.llm.registry import kind_of
from kora.llm.settings.config import SETTINGS

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
        entry.update({k: v for k in SETTINGS if (v := getattr(m, k)) is not None})
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


def rested_keys(statuses: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """Every call-store key the result rests on, with its model and kind of call (the
    shards' status files' `calls`, kora.llm.money.usage.Usage.used_records), the first said."""
    out: dict[str, tuple[str, str]] = {}
    for s in statuses:
        for row in s.get("calls", []):
            out.setdefault(str(row[0]), (str(row[1]), str(row[2])))
    return out


def usage_doc(
    target: str,
    statuses: list[dict[str, Any]],
    bill: Iterable[Charge],
    this_run: Iterable[Charge],
) -> dict[str, Any]:
    """usage.json: what the result cost (every call it rests on, once, at its latest line in
    the bill, `bill`: every run's), what the run writing it paid for those calls
    (`this_run`: its lines of the bill), and the calls its jobs asked for (their status
    files). A call the bill has no line of (an answer brought from another store) counts
    as a call with no tokens."""
    rested = rested_keys(statuses)
    latest: dict[str, tuple[float, Counts]] = {}
    for line in bill:
        if line.key in rested and (line.key not in latest or line.t >= latest[line.key][0]):
            latest[line.key] = (line.t, line.counts)
    result: dict[tuple[str, str], Counts] = defaultdict(Counts)
    for key, where in rested.items():
        result[where] += latest[key][1] if key in latest else Counts(calls=1)
    paid: dict[tuple[str, str], Counts] = defaultdict(Counts)
    for charge in this_run:
        if charge.key in rested:
            paid[rested[charge.key]] += charge.counts
    asked: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for s in statuses:
        for u in s.get("usage", []):
            asked[(u["model"], u["stage"])].update({k: int(u.get(k, 0)) for k in ASKED})
    rows = []
    for where in sorted(set(result) | set(asked)):
        a = asked[where]
        rows.append(
            {
                "model": where[0],
                "stage": where[1],
                **result[where].as_dict(),
                "paidThisRun": paid[where].as_dict(),
                "asked": a["calls"],
                "cached": a["cached"],
                "failures": a["failures"],
            }
        )
    by_stage: dict[str, float] = defaultdict(float)
    by_model: dict[str, float] = defaultdict(float)
    for (model, stage), c in result.items():
        by_stage[stage] += c.cost
        by_model[model] += c.cost
    return {
        "target": target,
        "result": sum(result.values(), Counts()).as_dict(),
        "paidThisRun": sum(paid.values(), Counts()).as_dict(),
        "asked": asked_row(sum(asked.values(), Counter())),
        "usage": rows,
        "costByStage": {k: round(v, 6) for k, v in sorted(by_stage.items())},
        "costByModel": {k: round(v, 6) for k, v in sorted(by_model.items())},
    }


def stage_failures(statuses: list[dict[str, Any]]) -> list[dict[str, object]]:
    return [
        {"stage": s["stage"], "shard": s["shard"], "failed": s["failed"], "errors": s["errors"][:5]}
        for s in statuses
        if s.get("failed")
    ]


def failure_summary(path: Path | str) -> str | None:
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
    out += [f"  - {e[:300]}" for e in seen[:3]]
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
    bill: Iterable[Charge] = (),
    this_run: Iterable[Charge] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(results.json, usage.json) documents for one target (`bill`: every run's lines,
    `this_run`: the lines of the run writing them)."""
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
    blocked = Counter[str]()
    for f in failed:
        blocked.update(f.get("blocked", {}))
    if blocked:  # tests a chat service would not let run, by the reason it gave
        results["blockedTests"] = dict(sorted(blocked.items()))
    results["stageFailures"] = stage_failures(statuses)
    results["rejectedScenarios"] = len(rejected)
    if rejected:
        results["rejectedFirst"] = [_rejected(r) for r in rejected[:NAMED_REJECTS]]
    # a run with failed tests or stage items is readable but not finished: the same
    # command retries what failed
    results["complete"] = results["failedTests"] == 0 and not results["stageFailures"]
    if is_mock:
        results["mock"] = True
        results["note"] = MOCK_NOTE
    return results, usage_doc(target, statuses, bill, this_run)


def _rejected(record: Mapping[str, Any]) -> dict[str, object]:
    """A rejected scenario as results.json names it: its seed and the validator's reasons."""
    seed = record["seed"]
    return {
        "seedId": seed["id"],
        "riskId": seed["riskId"],
        "ageRange": seed["ageRange"],
        "reasons": record["lastReasons"],
    }
