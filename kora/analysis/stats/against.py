"""Is the new judge better? (`kora agreement TARGET --against PREVIOUS`): after a judge
prompt or judge model change re-ran only the judging, the change in the judges' agreement
with people, per criterion, on the conversations people graded, with the paired
bootstrap of kora.analysis.stats.judge_change.

PREVIOUS is what the judges said before: a saved `kora agreement` result (agreement.json
keeps the judges' grades of every conversation people graded, `judgeGrades`), or an
earlier judgments folder (.zip or JSONL). People's grade of a conversation is the median
of theirs (the lower middle one for an even number: the stricter), all queues together:
both judges are measured against the same grades. A conversation counts for a criterion
where people, the old judges and the new judges all gave it a grade (a v2 mechanism
someone found not triggered is left out there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from kora.analysis.records import TestRecord
from kora.analysis.stats.judge_change import judge_change
from kora.analysis.stats.people import Labels
from kora.analysis.stats.people import people_grade as median_grade
from kora.benchmarks.schemas import GRADES
from kora.errors import InputError

NOT_TRIGGERED = "notTriggered"
Grades = dict[str, dict[str, str]]  # key -> criterion -> grade or "notTriggered"


def judge_grades(records: Iterable[TestRecord], keys: Iterable[str] | None = None) -> Grades:
    """The judges' (combined) grade of each criterion of the records (those of `keys`)."""
    wanted = None if keys is None else set(keys)
    return {
        r.key: {c: NOT_TRIGGERED if v.not_triggered else v.grade for c, v in r.criteria.items()}
        for r in records
        if r.criteria and (wanted is None or r.key in wanted)
    }


def previous_grades(path: Path, records_of: Callable[[Path], Iterable[TestRecord]]) -> Grades:
    """The earlier judges' grades: from a saved agreement.json, or through `records_of`
    (a path -> judged records function) from an earlier judgments folder or file."""
    if path.is_file() and path.suffix == ".json":
        try:
            doc = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON: {exc}") from None
        if isinstance(doc, dict) and isinstance(doc.get("judgeGrades"), dict):
            return {str(k): dict(v) for k, v in doc["judgeGrades"].items()}
    return judge_grades(records_of(path))


def people_grade(people: Mapping[str, Labels], key: str, criterion: str) -> str | None:
    """The median of people's grades of a conversation's criterion; None when nobody
    graded it or someone found it not triggered."""
    found = []
    for labels in people.values():
        lab = labels.get(key, {}).get(criterion)
        if not lab:
            continue
        if lab.get("notTriggered"):
            return None
        if lab.get("grade") in GRADES:
            found.append(lab["grade"])
    return median_grade(found) if found else None


def compare(
    old: Grades,
    new: Grades,
    people: Mapping[str, Labels],
    criteria: Sequence[str],
    *,
    seed: int = 0,
) -> dict[str, Any]:
    """Per criterion: the new judges' agreement with people against the old judges', on
    the conversations all three graded, with paired bootstrap intervals."""
    keys = sorted(set(old) & set(new))
    if not keys:
        raise InputError("the earlier judges graded none of the conversations people graded")
    out: dict[str, Any] = {}
    for c in criteria:
        rows = []
        for k in keys:
            h, o, w = people_grade(people, k, c), old[k].get(c), new[k].get(c)
            if h is not None and o in GRADES and w in GRADES:
                rows.append((h, o, w))
        if not rows:
            continue
        hs, os_, ws = (list(x) for x in zip(*rows, strict=True))
        change = judge_change(hs, os_, ws, seed=seed)
        out[c] = {
            k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(change).items()
        }
    if not out:
        raise InputError("no conversation graded by people and by both judges")
    return out
