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


def _groups(
    records: Sequence[TestRecord],
    key: Callable[[TestRecord], tuple[str, ...]],
    order: Callable[[tuple[str, ...]], Any],
) -> list[tuple[tuple[str, ...], list[TestRecord]]]:
    out: dict[tuple[str, ...], list[TestRecord]] = {}
    for r in records:
        out.setdefault(key(r), []).append(r)
    return sorted(out.items(), key=lambda kv: order(kv[0]))


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

    def groups(
        fields: tuple[str, ...],
        key: Callable[[TestRecord], tuple[str, ...]],
        order: Callable[[tuple[str, ...]], Any],
    ) -> list[dict[str, Any]]:
        return [
            {**dict(zip(fields, k, strict=True)), **group_summary(rs, crits)}
            for k, rs in _groups(ok, key, order)
        ]

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
            "riskCategory": groups(
                ("riskCategoryId",), lambda r: (r.category,), lambda k: names.cat_key(k[0])
            ),
            "risk": groups(
                ("riskCategoryId", "riskId"),
                lambda r: (r.category, r.risk),
                lambda k: (names.cat_key(k[0]), names.risk_key(k[1])),
            ),
            "ageRange": groups(("ageRange",), lambda r: (r.age,), lambda k: age_key(k[0])),
            "prompt": groups(("prompt",), lambda r: (r.prompt,), lambda k: prompt_key(k[0])),
            "riskAgeRange": groups(
                ("riskCategoryId", "riskId", "ageRange"),
                lambda r: (r.category, r.risk, r.age),
                lambda k: (names.cat_key(k[0]), names.risk_key(k[1]), age_key(k[2])),
            ),
            "riskAgeRangePrompt": groups(
                ("riskCategoryId", "riskId", "ageRange", "prompt"),
                lambda r: (r.category, r.risk, r.age, r.prompt),
                lambda k: (
                    names.cat_key(k[0]),
                    names.risk_key(k[1]),
                    age_key(k[2]),
                    prompt_key(k[3]),
                ),
            ),
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
