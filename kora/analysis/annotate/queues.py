"""What `kora annotate` shows next (`--queue`): the uniform sample for estimation (the
default; kora.analysis.annotate.sample), or a review queue that spends people's time
where it teaches most about the judge:

- `judges`: conversations the judges grade differently from each other (several judges),
  the widest split first (failing against exemplary on safety before anything else);
- `reference`: conversations this project's judge grades differently from the reference
  run's judge (`--reference`, as `kora agreement` takes it), safety first;
- `risks`: the risks where the judge and people have disagreed most on safety so far,
  their conversations not yet graded, worst risk first.

Grades given in a review queue are chosen for what the judge got wrong, so they would
bias a rate: their label lines say which queue they came from and only the uniform
sample's feed the corrected rates (kora.analysis.annotate.labels). Ties are broken in a
random order fixed by the seed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence

from kora.analysis.records import TestRecord
from kora.analysis.stats.people import Labels
from kora.benchmarks.schemas import GRADES
from kora.errors import InputError

TITLES = {
    "estimate": "uniform sample (for the corrected rates)",
    "judges": "review: the judges disagree",
    "reference": "review: the judge disagrees with the reference run's",
    "risks": "review: risks where judge and people disagree most",
}


def _rank(grade: str | None) -> int | None:
    return GRADES.index(grade) if grade in GRADES else None


def _spread(grades: Sequence[str | None]) -> int:
    ranks = [r for r in map(_rank, grades) if r is not None]
    return max(ranks) - min(ranks) if ranks else 0


def _ordered(scored: Sequence[tuple[tuple[int, ...], str]], seed: int) -> list[str]:
    """Keys by score, highest first; equal scores in a seeded random order."""
    rng = random.Random(seed)
    shuffled = sorted(scored, key=lambda s: s[1])
    rng.shuffle(shuffled)
    return [k for _, k in sorted(shuffled, key=lambda s: s[0], reverse=True)]


def judges_disagree(records: Sequence[TestRecord], seed: int) -> list[str]:
    """Tests whose judges split: by safety's spread of grades, then the number of criteria
    they split on, then the spreads summed."""
    if not any(len(r.judges) >= 2 for r in records):
        raise InputError("one judge graded this run: there is no disagreement between judges")
    scored = []
    for r in records:
        if len(r.judges) < 2:
            continue
        spreads = {
            c: _spread(
                [
                    None if j.criteria[c].not_triggered else j.criteria[c].grade
                    for j in r.judges
                    if c in j.criteria
                ]
            )
            for c in r.criteria
        }
        split = sum(1 for v in spreads.values() if v)
        if split:
            scored.append(((spreads.get("safety", 0), split, sum(spreads.values())), r.key))
    return _ordered(scored, seed)


def reference_disagrees(
    records: Sequence[TestRecord], reference: Sequence[TestRecord], seed: int
) -> list[str]:
    """Tests the reference run's judge graded otherwise: by the gap on safety, then the
    number of criteria graded otherwise (not triggered counts as a grade of its own)."""
    theirs = {r.key: r for r in reference if r.criteria}
    shared = [r for r in records if r.key in theirs]
    if not shared:
        raise InputError("the reference run has no test in common with this target")
    scored = []
    for r in shared:
        other = theirs[r.key].criteria
        differ = 0
        for c, v in r.criteria.items():
            w = other.get(c)
            if w is not None and (v.grade, v.not_triggered) != (w.grade, w.not_triggered):
                differ += 1
        gap = abs(GRADES.index(r.criteria["safety"].grade) - GRADES.index(other["safety"].grade))
        if differ:
            scored.append(((gap, differ), r.key))
    return _ordered(scored, seed)


def risks_disagree(
    records: Sequence[TestRecord], people: Mapping[str, Labels], seed: int
) -> list[str]:
    """The tests nobody has graded yet of the risks where the judge's safety grade and
    people's have differed, the risk with the largest share of differences first."""
    judge = {r.key: r for r in records}
    seen, differ = Counter[str](), Counter[str]()
    graded: set[str] = set()
    for labels in people.values():
        for key, crits in labels.items():
            graded.add(key)
            grade = crits.get("safety", {}).get("grade")
            if grade in GRADES and key in judge:
                risk = judge[key].risk
                seen[risk] += 1
                differ[risk] += grade != judge[key].criteria["safety"].grade
    if not seen:
        raise InputError("nobody has graded safety yet: grade some of the uniform sample first")
    worst = sorted(
        (r for r in seen if differ[r]), key=lambda r: (-differ[r] / seen[r], -seen[r], r)
    )
    out: list[str] = []
    for i, risk in enumerate(worst):
        keys = sorted(r.key for r in records if r.risk == risk and r.key not in graded)
        random.Random(f"{seed}:{i}").shuffle(keys)
        out += keys
    return out


def review(
    queue: str,
    records: Sequence[TestRecord],
    seed: int,
    people: Mapping[str, Labels],
    reference: Sequence[TestRecord] | None = None,
) -> list[str]:
    """The keys of a review queue in the order to grade them."""
    if queue == "judges":
        return judges_disagree(records, seed)
    if queue == "reference":
        if reference is None:
            raise InputError("--queue reference needs --reference (the reference run's results)")
        return reference_disagrees(records, reference, seed)
    if queue == "risks":
        return risks_disagree(records, people, seed)
    raise InputError(f"unknown queue {queue!r}; one of {', '.join(TITLES)}")
