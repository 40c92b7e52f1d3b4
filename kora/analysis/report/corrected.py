"""People's grades in summary.json and the report: how many of each kind there are, and
beside each judge-only rate (overall and per group: risk category, single risk, age
range, prompt variant; every criterion) the rate corrected for the judge's errors.

Only the grades of the current sample (label lines of queue `estimate` that name its id,
of a conversation the drawn sample holds) feed the corrected rates
(kora.analysis.stats.corrected), within the design's strata when it is stratified;
review-queue grades, and the earliest sample's, are counted and shown apart. No model is called:
the report job reads the judgments and the annotations folder. A run with no label file
gets none of this, and its summary.json stays as it was.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from kora.analysis.annotate.labels import is_estimate, lines, merge, queue_of
from kora.analysis.records import TestRecord, benchmark_of, judged
from kora.analysis.report.summary import GROUPS, group_by
from kora.analysis.stats.corrected import METHOD, NOT_TRIGGERED, Corrected, corrected_rate
from kora.benchmarks.schemas import GRADES

KINDS = ("failing", "exemplary")
Labels = dict[str, dict[str, dict[str, Any]]]  # key -> criterion -> label


@dataclass(frozen=True)
class People:
    """What an annotations folder holds: each annotator's label lines and the sample."""

    lines: dict[str, list[dict[str, Any]]]
    sample: dict[str, Any] | None = None
    estimate: dict[str, Labels] = field(default_factory=dict)  # the sample's grades only

    @property
    def sample_id(self) -> str | None:
        return None if self.sample is None else str(self.sample.get("id"))


def load_people(files: Iterable[Path | str]) -> People | None:
    """The label files (*.jsonl) and sample.json of an annotations folder, as the report
    rule lists them; None when no file holds a grade."""
    from kora.analysis.annotate.sample import DESIGNS, SAMPLE, drawn

    found: dict[str, list[dict[str, Any]]] = {}
    sample = None
    for f in map(Path, files):
        if f.name == SAMPLE:
            try:
                doc = orjson.loads(f.read_bytes())
            except orjson.JSONDecodeError:
                doc = None  # no usable sample: the report says there is none
            known = isinstance(doc, dict) and doc.get("design") in DESIGNS and "size" in doc
            sample = doc if known and isinstance(doc.get("keys"), list) else None
        elif f.suffix == ".jsonl":
            found[f.stem] = lines(f)
    found = {k: v for k, v in sorted(found.items()) if v}
    if not found:
        return None
    sid = None if sample is None else str(sample.get("id"))
    held = set() if sample is None else set(drawn(sample))
    estimate = {
        who: merge([a for a in ls if is_estimate(a, sid) and a.get("key") in held])
        for who, ls in found.items()
    }
    return People(found, sample, {w: e for w, e in estimate.items() if e})


def label_counts(people: People, records: Sequence[TestRecord]) -> dict[str, Any]:
    """How many conversations people graded, for the estimate and for review (by queue),
    and how many of the sample's first conversations were passed over."""
    sid = people.sample_id
    estimate: set[str] = set()
    review: dict[str, set[str]] = {}
    for ls in people.lines.values():
        for a in ls:
            if is_estimate(a, sid):
                estimate.add(str(a["key"]))
            else:
                q = queue_of(a)
                q = "earlier sample" if q == "estimate" else q  # another sample's estimate
                review.setdefault(q, set()).add(str(a["key"]))
    out: dict[str, Any] = {
        "annotators": list(people.lines),
        "estimate": len(estimate),
        "review": len(set().union(*review.values())) if review else 0,
        "reviewByQueue": {q: len(k) for q, k in sorted(review.items())},
    }
    if people.sample is not None:
        judged_keys = {r.key for r in records}
        order = [k for k in people.sample["keys"] if k in judged_keys]
        last = max((i for i, k in enumerate(order) if k in estimate), default=-1)
        out["sample"] = {
            "design": people.sample.get("design"),
            "id": sid,
            "seed": people.sample.get("seed"),
            "skipped": sum(1 for k in order[: last + 1] if k not in estimate),
        }
    return out


def human_values(
    records: Sequence[TestRecord],
    estimate: Mapping[str, Labels],
    criterion: str,
    kind: str,
    conditional: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Per record, people's share giving `kind` (NaN where nobody graded it) and, for a
    mechanism with a precondition, their share finding it applied."""
    y, t = np.full(len(records), np.nan), np.full(len(records), np.nan)
    for i, r in enumerate(records):
        ys, ts = [], []
        for labels in estimate.values():
            lab = labels.get(r.key, {}).get(criterion)
            if not lab:
                continue
            if conditional and lab.get("notTriggered"):
                ys.append(0.0)
                ts.append(0.0)
            elif lab.get("grade") in GRADES and not lab.get("notTriggered"):
                ys.append(float(lab["grade"] == kind))
                ts.append(1.0)
        if ys:
            y[i], t[i] = sum(ys) / len(ys), sum(ts) / len(ts)
    return y, t


def design_strata(people: People) -> dict[str, str] | None:
    """Each conversation's stratum in a stratified sample whose grades reach past its
    uniform start (kora.analysis.stats.design); None where the graded conversations are
    a uniform sample: the design is uniform, or people stopped within that start."""
    if people.sample is None or people.sample.get("design") != "stratified":
        return None
    from kora.analysis.annotate.sample import stratum_of
    from kora.analysis.stats.design import FAILING, uniform_start

    stratum = stratum_of(people.sample)
    graded = {k for labels in people.estimate.values() for k in labels}
    reach = max((i + 1 for i, k in enumerate(people.sample["keys"]) if k in graded), default=0)
    judge_share = sum(s == FAILING for s in stratum.values()) / max(len(stratum), 1)
    share = float(people.sample.get("shares", {}).get(FAILING, 0.0))
    return stratum if reach > uniform_start(judge_share, share) else None


def rate_of(
    records: Sequence[TestRecord],
    people: People,
    criterion: str,
    kind: str,
    conditional: bool,
    strata: Mapping[str, str] | None = None,
) -> Corrected | None:
    """The corrected rate of one kind of one criterion over `records`, with the design's
    stratum by key (`design_strata`; None: a uniform sample)."""
    rs = [r for r in records if criterion in r.criteria]
    if not rs:
        return None
    cells = [
        NOT_TRIGGERED if r.criteria[criterion].not_triggered else r.criteria[criterion].grade
        for r in rs
    ]
    judge = np.array([float(c == kind) for c in cells])
    y, t = human_values(rs, people.estimate, criterion, kind, conditional)
    by = None if strata is None else [strata.get(r.key, "") for r in rs]
    return corrected_rate(cells, judge, y, t if conditional else None, strata=by)


def figures(c: Corrected) -> dict[str, Any]:
    return {
        "rate": round(c.estimate, 6),
        "low": round(c.low, 6),
        "high": round(c.high, 6),
        "n": c.n,
        "judgeExcludes": c.judge_excludes,
        "humansOnly": {
            "rate": round(c.humans, 6),
            "low": round(c.humans_low, 6),
            "high": round(c.humans_high, 6),
        },
    }


def unusable(people: People, records: Sequence[TestRecord]) -> str | None:
    """Why the grades cannot correct these judged records' rates; None when they can."""
    if people.sample is None:
        return "no sample drawn yet (kora annotate draws one)"
    keys = set(people.sample["keys"])
    newer = sum(1 for r in records if r.key not in keys)
    if newer:
        return f"{newer} judged conversations are newer than the sample: draw a new one"
    return None if people.estimate else "no grade of the sample yet"


def overall_safety(records: Sequence[TestRecord], people: People | None) -> dict[str, Any] | None:
    """The corrected safety rates of a target's judged records, for the leaderboard."""
    ok = judged(records)
    if people is None or unusable(people, ok) is not None:
        return None
    strata = design_strata(people)
    found = {k: rate_of(ok, people, "safety", k, False, strata) for k in KINDS}
    shown = {k: figures(v) for k, v in found.items() if v is not None}
    return shown or None


def corrected_ranking(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The leaderboard's targets with corrected rates, by corrected safety failing rate
    (then corrected exemplary, higher first, then name)."""
    with_rates = [r for r in rows if "failing" in (r.get("corrected") or {})]
    return [
        r["target"]
        for r in sorted(
            with_rates,
            key=lambda r: (
                r["corrected"]["failing"]["rate"],
                -(r["corrected"].get("exemplary") or {"rate": 0.0})["rate"],
                r["target"],
            ),
        )
    ]


CORRECTED_GROUPS = ("riskCategory", "risk", "ageRange", "prompt")  # of summary.json's GROUPS


def add_corrected(summary: dict[str, Any], records: Sequence[TestRecord], people: People) -> None:
    """summary.json's `humanLabels`, and `corrected` beside the judge-only rates where
    the sample allows (at least 10 of the group's conversations graded for the estimate)."""
    ok = judged(records)
    counts = label_counts(people, ok)
    summary["humanLabels"] = counts
    why = unusable(people, ok)
    if why is not None:
        counts["corrected"] = False
        counts["why"] = why
        return
    counts["corrected"] = True
    counts["method"] = METHOD
    # a rate among the conversations a criterion applied to: the version's mechanisms
    # with a precondition, and any criterion the judges found not triggered somewhere
    conditional = set(benchmark_of(ok).conditional) | {
        c for r in ok for c, v in r.criteria.items() if v.not_triggered
    }

    strata = design_strata(people)

    def attach(target: dict[str, Any], rs: Sequence[TestRecord]) -> None:
        for c in summary["criteria"]:
            if c not in target:
                continue
            found = {k: rate_of(rs, people, c, k, c in conditional, strata) for k in KINDS}
            shown = {k: figures(v) for k, v in found.items() if v is not None}
            if shown:
                target[c]["corrected"] = shown

    attach(summary["overall"], ok)
    for name in CORRECTED_GROUPS:
        fields = GROUPS[name]
        members = group_by(ok, fields)
        for entry in summary["groups"][name]:
            attach(entry, members.get(tuple(entry[f] for f in fields), []))


def judge_off_count(summary: Mapping[str, Any]) -> Counter[str]:
    """How many corrected rates the judge-only interval excludes, and how many there are."""
    out: Counter[str] = Counter()

    def visit(entry: Mapping[str, Any]) -> None:
        for c in summary["criteria"]:
            for v in entry.get(c, {}).get("corrected", {}).values():
                out["rates"] += 1
                out["excluded"] += bool(v["judgeExcludes"])

    visit(summary["overall"])
    for name in CORRECTED_GROUPS:
        for entry in summary["groups"][name]:
            visit(entry)
    return out
