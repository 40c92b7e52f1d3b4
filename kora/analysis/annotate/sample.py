"""Which conversations people grade for estimation: a uniform random sample, the same for
the same seed, shared by every annotator (results/<target>/annotations/sample.json).

Decision: every judged conversation has a known chance of being graded, above zero:
the corrected rates (kora.analysis.stats.corrected) weight each grade by its inverse.
The sample used to be stratified by risk, age range and the judge's safety grade, one
conversation of each stratum in turn: a stratum past the sample's size had no chance at
all (with 72 strata and 50 conversations, 22 strata), which leaves no valid estimate of
any rate that includes them. A uniform sample (the default) gives every conversation the
same chance, and the judge's grades enter the estimate afterwards, as post-strata,
whichever judge graded last. Rare strata are what the review queues are for
(kora.analysis.annotate.queues).

The sample is a seeded random order of every judged conversation and a size, both
written when it is drawn (--size, before anyone grades): the drawn sample is the order's
first `size`, and only grades of those count for the estimate. Any first part of a random
order is itself a uniform sample, so people can stop before the end, provided they grade
in order (a conversation skipped because of what it says would bias the estimate; the
report counts those skipped); how many count is never decided after seeing grades. The
sample has an id (from its seed and its order), which every estimate label carries: a
new sample starts a new estimate. sample.json: {design: "uniform", id, seed, size,
keys}.

`--design stratified` (kora.analysis.stats.design) is the other sample: the judged
conversations in two strata by the judge's safety grade (failing, the rest), the
judge's failing ones drawn more often, interleaved into one order so that any first
part of it is a stratified sample with known shares. sample.json then also holds
`strata` ({"failing": [keys]}, the rest being the other stratum) and `shares`; the
corrected rates weight each grade by its stratum's conversations over its grades there.
Strata made from the judge's grades of the day stay what they were when drawn: they say
how the sample was drawn, not what the judge says now (the current grades are the
post-strata, as for the uniform sample).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from kora.analysis.records import TestRecord
from kora.analysis.stats.design import FAILING, OTHER, allocation, guess, interleave
from kora.analysis.stats.people import Labels
from kora.io import write_json

SAMPLE = "sample.json"
UNIFORM, STRATIFIED = "uniform", "stratified"
DESIGNS = (UNIFORM, STRATIFIED)
SIZE = 100  # the drawn sample's conversations when --size is not given


def order(records: Sequence[TestRecord], seed: int) -> list[str]:
    """Every judged test's key in a random order fixed by `seed`."""
    keys = sorted(r.key for r in records if r.criteria)
    random.Random(seed).shuffle(keys)
    return keys


def sample_id(seed: int, keys: Sequence[str]) -> str:
    return hashlib.sha256(orjson.dumps([seed, list(keys)])).hexdigest()[:12]


def strata_of(records: Sequence[TestRecord]) -> dict[str, list[str]]:
    """The judged tests by the judge's safety grade: failing, and the rest."""
    out: dict[str, list[str]] = {FAILING: [], OTHER: []}
    for r in records:
        if r.criteria:
            safety = r.criteria.get("safety")
            out[FAILING if safety is not None and safety.grade == "failing" else OTHER].append(
                r.key
            )
    return out


def seen_by_stratum(
    strata: dict[str, list[str]], people: Mapping[str, Labels]
) -> dict[str, tuple[float, int]]:
    """People's safety grades so far in each stratum: (failing, graded), several people
    on one conversation averaged."""
    out = {}
    for s, keys in strata.items():
        k, n = 0.0, 0
        for key in keys:
            grades = [
                p[key]["safety"].get("grade") for p in people.values() if "safety" in p.get(key, {})
            ]
            grades = [g for g in grades if g]
            if grades:
                k += sum(g == "failing" for g in grades) / len(grades)
                n += 1
        out[s] = (k, n)
    return out


def drawn(doc: dict[str, Any]) -> list[str]:
    """The drawn sample: the first `size` of the order."""
    keys: list[str] = doc["keys"]
    return keys[: doc["size"]]


def ensure(
    folder: Path,
    records: Sequence[TestRecord],
    seed: int,
    design: str | None = None,
    people: Mapping[str, Labels] | None = None,
    size: int | None = None,
) -> tuple[dict[str, Any], str]:
    """The folder's sample, drawn with `seed`, `design` (None: the sample's own, or
    uniform when there is none) and `size` (None: `SIZE`) if there is none; and a note
    for the user (empty when nothing happened). `people`: grades so far, which move the
    stratified design's guess."""
    path = folder / SAMPLE
    if path.exists():
        return _held_sample(path, seed, design, size), ""
    design = design or UNIFORM
    size = SIZE if size is None else size
    strata: dict[str, Any] = {}
    if design == UNIFORM:
        keys = order(records, seed)
    else:
        keys, strata = _stratified(records, seed, people or {})
    doc = {
        "design": UNIFORM if design == UNIFORM else STRATIFIED,
        "id": sample_id(seed, keys),
        "seed": seed,
        "size": size,
        "keys": keys,
        **strata,
    }
    write_json(path, doc)
    drew = (
        f"drew a {design} sample of {min(size, len(keys))} of the {len(keys)} judged "
        f"conversations: {path}"
    )
    return doc, drew


def _held_sample(path: Path, seed: int, design: str | None, size: int | None) -> dict[str, Any]:
    """The sample in `path`; InputError unless kora drew it with this seed and design, and
    `size` or more."""
    from kora.errors import InputError

    try:
        doc = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        doc = None
    if not (isinstance(doc, dict) and doc.get("design") in DESIGNS and "size" in doc):
        raise InputError(
            f"{path}: not a sample kora drew (no design {' or '.join(DESIGNS)} and size); "
            "remove the file to draw one"
        )
    held = len(drawn(doc))
    if doc.get("seed") != seed or design not in (None, doc.get("design")):
        raise InputError(
            f"{path}: the sample was drawn with --design {doc.get('design')} --seed "
            f"{doc.get('seed')}; give those, or remove the file to draw another (its "
            "grades then stop counting for the corrected rates)"
        )
    if size is not None and size > held:
        raise InputError(
            f"{path}: the sample was drawn with --size {held}, fixed before anyone "
            "graded so that what people saw cannot decide how many grades count; "
            f"give --size {held} or less, or remove the file to draw a larger one "
            "(its grades then stop counting for the corrected rates)"
        )
    return doc


def _stratified(
    records: Sequence[TestRecord], seed: int, people: Mapping[str, Labels]
) -> tuple[list[str], dict[str, Any]]:
    """A stratified sample's order, and its strata and shares as sample.json holds them."""
    strata = strata_of(records)
    total = sum(map(len, strata.values()))
    judge_share = len(strata[FAILING]) / total if total else 0.0
    shares = allocation(judge_share, guess(judge_share, seen_by_stratum(strata, people)))
    return interleave(strata, shares, seed), {
        "strata": {FAILING: sorted(strata[FAILING])},
        "shares": {s: round(v, 6) for s, v in shares.items()},
    }


def stratum_of(doc: dict[str, Any]) -> dict[str, str]:
    """Each key's stratum in a stratified sample (every key `failing` or `other`)."""
    failing = set(doc.get("strata", {}).get(FAILING, []))
    return {k: FAILING if k in failing else OTHER for k in doc["keys"]}
