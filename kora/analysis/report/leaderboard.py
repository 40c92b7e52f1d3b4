"""The leaderboard's figures (leaderboard.json): targets ranked by their safety failing
rate, each rank with its bootstrap interval (`ranking`), and every pair of targets
compared on the tests both ran, cell by cell (`pairs`: comparison documents,
kora.analysis.stats.cells)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kora import benchmarks
from kora.analysis.records import TestRecord
from kora.analysis.report.corrected import corrected_ranking
from kora.analysis.report.names import Names
from kora.analysis.report.pairs import compare_pair, rank_intervals
from kora.analysis.stats.paired import ALPHA
from kora.analysis.stats.rates import Rate
from kora.benchmarks.taxonomy import Taxonomy
from kora.llm.settings.config import said_settings

# results.json's sums key of each criterion


def target_model(results: Mapping[str, Any]) -> str:
    """'provider/model (its settings)' of the model in the target role, from results.json's
    `models`: two settings of one model are two targets."""
    for name, m in (results.get("models") or {}).items():
        if "target" in m.get("roles", []):
            settings = said_settings(m)
            return f"{m.get('provider')}/{m.get('model') or name}" + (
                f" ({settings})" if settings else ""
            )
    return ""


def spend(usage: Mapping[str, Any] | None, tests: int) -> dict[str, float] | None:
    """What the target's own calls (usage.json's `target` rows) cost a test, and the
    tokens it reasoned a test where its provider reports them; None without them."""
    if not usage or not tests:
        return None
    rows = [r for r in usage.get("usage", []) if r.get("stage") == "target"]
    return {
        "costPerTest": round(sum(r.get("cost", 0.0) for r in rows) / tests, 6),
        "reasoningTokensPerTest": round(sum(r.get("reasoning_tokens", 0) for r in rows) / tests, 1),
    }


def sums_rates(results: Mapping[str, Any]) -> dict[str, Any]:
    """Overall rates from results.json's scores (the reference's sums), by criterion."""
    scores = results.get("scores") or []
    out: dict[str, Any] = {"n": sum(int(s["sums"]["al"]) for s in scores)}
    for c, (f, e, n) in benchmarks.of_results(results).tallies(scores).items():
        out[c] = {"failing": Rate(f, n).as_dict(), "exemplary": Rate(e, n).as_dict()}
    return out


def leaderboard_criteria(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """The criteria columns: those of the version the targets' results.json were made by."""
    for res in entries:
        return list(benchmarks.of_results(res).criteria)
    return list(benchmarks.get(benchmarks.DEFAULT).criteria)


def build_leaderboard(
    entries: Mapping[str, Mapping[str, Any]],
    records: Mapping[str, Sequence[TestRecord]] | None = None,
    taxonomy: Taxonomy | None = None,
    corrected: Mapping[str, Mapping[str, Any] | None] | None = None,
    usage: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Targets ranked by safety failing rate, and every pair compared on shared tests (A
    the better ranked); `corrected`: a target's safety rates corrected by people's grades,
    where it has them (kora.analysis.report.corrected.overall_safety), and a second
    ranking by them; `usage`: each target's usage.json, for what it cost a test (`spend`)."""
    names = Names(taxonomy, [])
    rows = []
    for name, res in entries.items():
        rows.append(
            {
                "target": name,
                "model": target_model(res),
                "judges": res.get("judges") or ([res["judge"]] if "judge" in res else []),
                "prompts": res.get("prompts") or [],
                "mock": bool(res.get("mock")),
                "failedTests": res.get("failedTests", 0),
                **sums_rates(res),
            }
        )
        rows[-1]["spend"] = spend((usage or {}).get(name), rows[-1]["n"])
        fixed = (corrected or {}).get(name)
        if fixed:
            rows[-1]["corrected"] = dict(fixed)
    rows.sort(
        key=lambda r: (
            r["safety"]["failing"]["rate"] if r["n"] else 2.0,
            -(r["safety"]["exemplary"]["rate"] or 0.0),
            r["target"],
        )
    )
    pairs = []
    if records:
        for a, b in itertools.combinations([r["target"] for r in rows], 2):
            if a in records and b in records:
                pairs.append(compare_pair(a, b, records[a], records[b], names))
    doc = {
        "alpha": ALPHA,
        "criteria": leaderboard_criteria(entries.values()),
        "targets": rows,
        "ranking": rank_intervals(records) if records else None,
        "pairs": pairs,
    }
    if any("corrected" in r for r in rows):
        doc["correctedRanking"] = corrected_ranking(rows)
    return doc


def ranks(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """1-based ranks of ranked rows; equal safety rates share a rank."""
    out: list[int] = []
    last = None
    for i, r in enumerate(rows, 1):
        now = (r["safety"]["failing"]["rate"], r["safety"]["exemplary"]["rate"])
        out.append(out[-1] if out and now == last else i)
        last = now
    return out
