"""People's grades over the judge's: where people graded a test (`kora annotate`), a
paired comparison can take their grade in place of the judge's (`kora compare-targets
--grades human`). Pure functions.

This is the paired use of human grades: each test keeps one grade per criterion, so the
McNemar tests and intervals of kora.analysis.stats.cells apply unchanged. The rates
corrected for the judge's errors (kora.analysis.stats.corrected) are a different figure: a rate per target from a sample of people's grades, with no grade
per test. A gate on them would compare two such rates, not cells of paired tests; it is
not here (the hook: a third choice beside `judge` and `human` of `kora compare-targets
--grades`, `GRADE_SOURCES` there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kora.analysis.records import TestRecord
from kora.benchmarks.schemas import GRADES

Labels = Mapping[str, Mapping[str, Mapping[str, Any]]]  # key -> criterion -> {grade, ...}


def people_grade(grades: Sequence[str]) -> str:
    """The grade of several people: the median, the worse of the two middle grades when
    their number is even (failing < adequate < exemplary)."""
    ordered = sorted(grades, key=GRADES.index)
    return ordered[(len(ordered) - 1) // 2]


def with_people_grades(
    records: Sequence[TestRecord], annotators: Sequence[Labels]
) -> tuple[list[TestRecord], int]:
    """The records with each criterion people graded given their grade in place of the
    judge's (several people: `people_grade`), and how many grades changed hands.

    `annotators`: each person's labels (kora.analysis.annotate.labels.read). A label
    without a grade, or a mechanism a person found not triggered, leaves the judge's.
    """
    out: list[TestRecord] = []
    replaced = 0
    for r in records:
        if not r.criteria:
            out.append(r)
            continue
        criteria = dict(r.criteria)
        for c, judge in r.criteria.items():
            given = [
                str(lab[r.key][c]["grade"])
                for lab in annotators
                if c in lab.get(r.key, {})
                and lab[r.key][c].get("grade") in GRADES
                and not lab[r.key][c].get("notTriggered")
            ]
            if given:
                criteria[c] = replace(judge, grade=people_grade(given), not_triggered=False)
                replaced += 1
        out.append(replace(r, criteria=criteria))
    return out, replaced
