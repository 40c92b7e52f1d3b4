"""summary.json: every figure of the report for machines, per group and overall, each rate
with n and its 95 % Wilson interval."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kora import benchmarks
from kora.analysis.records import CRITERIA, TestRecord, judged, record_from_dict
from kora.analysis.report.names import Names, age_key, prompt_key
from kora.analysis.report.replies import reply_summary
from kora.analysis.stats.analyses import (
    compare_prompts,
    criteria_of,
    group_summary,
    judge_agreement,
)
from kora.benchmarks.outcomes import Judgment
from kora.benchmarks.taxonomy import Taxonomy
from kora.errors import InputError


def records_of(judgments: Iterable[Judgment | TestRecord | Mapping[str, Any]]) -> list[TestRecord]:
    """Test records of Judgment objects, records or their JSON dicts, in the given order."""
    out: list[TestRecord] = []
    for i, j in enumerate(judgments):
        if isinstance(j, TestRecord):
            out.append(j)
            continue
        obj = j.model_dump(mode="json", exclude_none=True) if isinstance(j, Judgment) else dict(j)
        rec = record_from_dict(obj, f"judgment {i + 1}")
        if rec is None:
            raise InputError(f"judgment {i + 1} ({obj.get('key')}): neither graded nor failed")
        out.append(rec)
    return out


# summary.json's groups, each by the fields its entries are named by
GROUPS: dict[str, tuple[str, ...]] = {
    "riskCategory": ("riskCategoryId",),
    "risk": ("riskCategoryId", "riskId"),
    "ageRange": ("ageRange",),
    "prompt": ("prompt",),
    "riskAgeRange": ("riskCategoryId", "riskId", "ageRange"),
    "riskAgeRangePrompt": ("riskCategoryId", "riskId", "ageRange", "prompt"),
}
FIELDS: dict[str, Callable[[TestRecord], str]] = {
    "riskCategoryId": lambda r: r.category,
    "riskId": lambda r: r.risk,
    "ageRange": lambda r: r.age,
    "prompt": lambda r: r.prompt,
}


def group_by(
    records: Iterable[TestRecord], fields: Sequence[str]
) -> dict[tuple[str, ...], list[TestRecord]]:
    """The records by their values of the fields, in the order first met."""
    groups: dict[tuple[str, ...], list[TestRecord]] = {}
    for r in records:
        groups.setdefault(tuple(FIELDS[f](r) for f in fields), []).append(r)
    return groups


def _group_entries(
    records: Sequence[TestRecord], fields: Sequence[str], crits: Sequence[str], names: Names
) -> list[dict[str, Any]]:
    """The figures of each group of records sharing the fields' values, in the report's order."""
    order = {
        "riskCategoryId": names.cat_key,
        "riskId": names.risk_key,
        "ageRange": age_key,
        "prompt": prompt_key,
    }
    ranked = sorted(
        group_by(records, fields).items(),
        key=lambda kv: [order[f](v) for f, v in zip(fields, kv[0], strict=True)],
    )
    return [{**dict(zip(fields, k, strict=True)), **group_summary(rs, crits)} for k, rs in ranked]


def risk_ordered(doc: dict[str, Any] | None, names: Names) -> dict[str, Any] | None:
    """A paired comparison with its per-risk rows in taxonomy order."""
    if doc is not None:
        doc["risks"].sort(
            key=lambda r: (names.cat_key(r["riskCategoryId"]), names.risk_key(r["riskId"]))
        )
    return doc


def build_summary(
    records: Sequence[TestRecord], results: Mapping[str, Any], taxonomy: Taxonomy | None = None
) -> dict[str, Any]:
    """Every figure of the report, with n and 95 % Wilson intervals, per group and overall."""
    names = Names(taxonomy, records)
    ok = judged(records)
    crits = criteria_of(ok) or list(CRITERIA)
    target = results.get("target") or (records[0].raw.get("target") if records else None)
    doc: dict[str, Any] = {
        **benchmarks.of_results(results).stamp,
        "target": target,
        "judges": results.get("judges")
        or ([results["judge"]] if "judge" in results else [])
        or list(dict.fromkeys(j.judge for r in ok for j in r.judges)),
        "mock": bool(results.get("mock")),
        # false when tests or earlier stages failed: the figures leave those out
        "complete": bool(results.get("complete", True)),
    }
    if results.get("note"):
        doc["note"] = results["note"]
    doc |= {
        "interval": {"method": "wilson", "confidence": 0.95},
        "tests": len(records),
        "judged": len(ok),
        "errors": len(records) - len(ok),
        "criteria": crits,
        "overall": group_summary(ok, crits),
        "groups": {
            name: _group_entries(ok, fields, crits, names) for name, fields in GROUPS.items()
        },
        "promptComparison": risk_ordered(compare_prompts(ok), names),
        "judgeAgreement": judge_agreement(ok, crits),
    }
    replies = reply_summary(records)
    if replies is not None:  # runs that record why each reply ended
        doc["targetReplies"] = replies
    blocked = Counter(r.blocked for r in records if r.blocked)
    if blocked:  # tests a chat service would not let run, by its reason
        doc["blockedTests"] = dict(sorted(blocked.items()))
    return doc
