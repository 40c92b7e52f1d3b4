"""The leaderboard's pairs of targets and ranks: each pair's comparison document
(kora.analysis.stats.cells) in taxonomy order, its grid of cells coloured by adjusted
verdict, the conversations where the two disagree (for the page's side-by-side view), and
each target's rank with its bootstrap interval (kora.analysis.stats.ranks).

The side-by-side data (`side_by_side`), read by templates/compare.js: `targets`: per
target, per test key, `m` [[role, text], ...] and `g` {criterion: grade}; `pairs`: per
pair, `a`, `b` and per cell id its `label`, `criterion` and `d`, the [A key, B key] pairs
whose grades differ. Only the conversations some cell lists are embedded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kora.analysis.records import TestRecord, criterion_label, judged
from kora.analysis.report.names import Names
from kora.analysis.stats.cells import compare_cells
from kora.analysis.stats.ranks import bootstrap_ranks

DIMENSION_LABELS = {
    "riskCategory": "category",
    "risk": "risk",
    "ageRange": "ages",
    "prompt": "prompt",
}


def compare_pair(
    a: str,
    b: str,
    ra: Sequence[TestRecord],
    rb: Sequence[TestRecord],
    names: Names,
) -> dict[str, Any]:
    """A and B's comparison document, categories and risks in taxonomy order."""
    return compare_cells(
        ra,
        rb,
        a,
        b,
        category_order=sorted(names.categories, key=names.cat_key),
        risk_order=sorted(names.risks, key=names.risk_key),
    )


def cell_label(cell: Mapping[str, Any], names: Names) -> str:
    """'Safety: all tests', 'Safety: risk Cybersecurity', 'Anthropomorphism: all tests'."""
    crit = criterion_label(cell["criterion"])
    dim, value = cell["dimension"], cell["value"]
    if dim == "overall":
        return f"{crit}: all tests"
    shown = (
        names.category(value)
        if dim == "riskCategory"
        else names.risk(value)
        if dim == "risk"
        else value
    )
    return f"{crit}: {DIMENSION_LABELS.get(dim, dim)} {shown}"


def verdict_class(o: Mapping[str, Any]) -> str:
    """The colour of one outcome of a cell: who is worse, after Holm or after BH only."""
    if o["holm"]:
        return f"v-holm-{o['worse']}"
    if o["bh"]:
        return f"v-bh-{o['worse']}"
    return "v-ns"


def verdict_text(o: Mapping[str, Any], a: str, b: str, outcome: str) -> str:
    if not (o["holm"] or o["bh"]):
        return "no difference after adjustment"
    who = a if o["worse"] == "a" else b
    what = "fails more often" if outcome == "failing" else "is exemplary less often"
    return f"{who} {what}" + (" (Holm)" if o["holm"] else " (Benjamini-Hochberg only)")


def grid(doc: Mapping[str, Any], names: Names) -> list[dict[str, Any]]:
    """One row per cell for the page: its label, n, and each outcome's figures, colour and
    verdict; the number of pairs whose grades differ."""
    rows = []
    for cell in doc["cells"]:
        row: dict[str, Any] = {
            "id": cell["id"],
            "label": cell_label(cell, names),
            "dimension": cell["dimension"],
            "n": cell["n"],
            "disagree": len(cell["disagree"]),
        }
        for g in ("failing", "exemplary"):
            o = cell[g]
            row[g] = {
                **o,
                "cls": verdict_class(o),
                "verdict": verdict_text(o, doc["a"], doc["b"], g),
            }
        rows.append(row)
    return rows


def overall_verdict(doc: Mapping[str, Any]) -> str:
    """safety's overall failing rate in words, tested alone."""
    if not doc["cells"] or doc["cells"][0]["id"] != "safety/overall":
        return "no paired tests"
    o = doc["cells"][0]["failing"]
    if o["p"] >= doc["alpha"] or o["worse"] is None:
        return "no significant difference"
    return f"{doc['a'] if o['worse'] == 'a' else doc['b']} fails significantly more often"


def side_by_side(
    pairs: Sequence[Mapping[str, Any]], records: Mapping[str, Sequence[TestRecord]], names: Names
) -> dict[str, Any]:
    """The conversations the pairs' cells open, once per target (see the module's docstring)."""
    wanted: dict[str, set[str]] = {}
    out_pairs = []
    for p in pairs:
        cells = {}
        for cell in p["cells"]:
            for ka, kb in cell["disagree"]:
                wanted.setdefault(p["a"], set()).add(ka)
                wanted.setdefault(p["b"], set()).add(kb)
            cells[cell["id"]] = {
                "label": cell_label(cell, names),
                "criterion": cell["criterion"],
                "d": cell["disagree"],
            }
        out_pairs.append({"a": p["a"], "b": p["b"], "cells": cells})
    targets: dict[str, dict[str, Any]] = {}
    for t, keys in wanted.items():
        targets[t] = {
            r.key: {
                "m": [
                    [m.get("role", ""), m.get("content", "")] for m in r.raw.get("messages") or []
                ],
                "g": {c: v.grade for c, v in r.criteria.items()},
            }
            for r in judged(records.get(t, []))
            if r.key in keys
        }
    return {
        "criterionLabels": {c: criterion_label(c) for p in pairs for c in p["criteria"]},
        "targets": targets,
        "pairs": out_pairs,
    }


def rank_intervals(records: Mapping[str, Sequence[TestRecord]]) -> dict[str, Any] | None:
    """Each target's rank by safety failing rate on the scenarios all share, with its 95 %
    bootstrap interval over scenarios and the targets it cannot be told apart from
    (`pairwise` rule); None with fewer than two targets or no shared scenario."""
    failing = {t: {r.pair_key: r.failing for r in judged(rs)} for t, rs in records.items()}
    failing = {t: f for t, f in failing.items() if f}
    if len(failing) < 2 or not set.intersection(*(set(f) for f in failing.values())):
        return None
    ranking = bootstrap_ranks(failing)
    return {
        "n": ranking.n,
        "resamples": ranking.resamples,
        "seed": ranking.seed,
        "confidence": ranking.confidence,
        "rule": "pairwise",
        "targets": {
            r.target: {
                "rank": r.rank,
                "low": r.low,
                "high": r.high,
                "failing": r.failing,
                "tiedWith": ranking.tied_with(r.target),
            }
            for r in ranking.ranks
        },
    }
