"""Which conversations people grade for estimation: a uniform random sample, the same for
the same seed, shared by every annotator (results/<target>/annotations/sample.json).

Decision: uniform, not stratified. The corrected rates (kora.analysis.stats.corrected)
need every judged conversation to have the same, known chance of being graded. The
sample used to be stratified by risk, age range and the judge's safety grade, one
conversation of each stratum in turn: a stratum past the sample's size had no chance at
all (with 72 strata and 50 conversations, 22 strata), which leaves no valid estimate of
any rate that includes them, and the strata were the judge's grades of the day, wrong
once the judge is run again. A uniform sample needs neither: the judge's grades enter
the estimate afterwards, as post-strata, whichever judge graded last. Rare strata are
what the review queues are for (kora.analysis.annotate.queues).

The sample is a seeded random order of every judged conversation, of which the page
offers the first --size: any first part of a random order is itself a uniform sample,
so people can stop after 100 or go on to 300 without a new draw, provided they grade in
order (a conversation skipped because of what it says would bias the estimate; the
report counts those skipped). The sample has an id (from its seed and its order), which
every estimate label carries: a new sample starts a new estimate. sample.json:
{design: "uniform", id, seed, keys}; one without `design` is the earlier stratified
sample, kept aside as sample-stratified.json when a uniform one is drawn.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from kora.analysis.records import TestRecord
from kora.io import write_json

SAMPLE = "sample.json"
LEGACY_SAMPLE = "sample-stratified.json"


def order(records: Sequence[TestRecord], seed: int) -> list[str]:
    """Every judged test's key in a random order fixed by `seed`."""
    keys = sorted(r.key for r in records if r.criteria)
    random.Random(seed).shuffle(keys)
    return keys


def draw(records: Sequence[TestRecord], size: int, seed: int) -> list[str]:
    """A uniform random sample of `size` judged tests: the first of `order`."""
    return order(records, seed)[:size]


def sample_id(seed: int, keys: Sequence[str]) -> str:
    return hashlib.sha256(orjson.dumps([seed, list(keys)])).hexdigest()[:12]


def load(folder: Path) -> dict[str, Any] | None:
    """The uniform sample of an annotations folder, None when it has none yet."""
    path = folder / SAMPLE
    if not path.exists():
        return None
    doc = orjson.loads(path.read_bytes())
    return doc if isinstance(doc, dict) and doc.get("design") == "uniform" else None


def ensure(folder: Path, records: Sequence[TestRecord], seed: int) -> tuple[dict[str, Any], str]:
    """The folder's uniform sample, drawn with `seed` if there is none; and a note for the
    user (empty when nothing happened). An earlier stratified sample is moved aside."""
    from kora.errors import InputError

    path = folder / SAMPLE
    note = ""
    if path.exists():
        doc = orjson.loads(path.read_bytes())
        if isinstance(doc, dict) and doc.get("design") == "uniform":
            if doc.get("seed") != seed:
                raise InputError(
                    f"{path}: the sample was drawn with --seed {doc.get('seed')}; give that, "
                    "or remove the file to draw another (its grades then stop counting "
                    "for the corrected rates)"
                )
            return doc, note
        path.replace(folder / LEGACY_SAMPLE)
        note = (
            f"{path} was the earlier stratified sample: kept as {LEGACY_SAMPLE}; its grades "
            "count for agreement, not for the corrected rates. A uniform sample is drawn."
        )
    keys = order(records, seed)
    doc = {"design": "uniform", "id": sample_id(seed, keys), "seed": seed, "keys": keys}
    write_json(path, doc)
    return doc, note or f"drew a uniform sample of the {len(keys)} judged conversations: {path}"
