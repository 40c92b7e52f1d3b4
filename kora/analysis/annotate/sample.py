"""Which conversations people grade: a sample stratified by risk, age range and the
judges' safety grade, the same for the same seed, shared by every annotator."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from kora.analysis.records import TestRecord


def stratum(r: TestRecord) -> tuple[str, str, str]:
    return r.risk, r.age, r.criteria["safety"].grade


def draw(records: Sequence[TestRecord], size: int, seed: int) -> list[str]:
    """Keys of `size` judged tests: each stratum shuffled with `seed`, then one test from
    each stratum in turn (strata in a fixed order), so rare strata (a risk's few failing
    tests) are in the sample and large ones do not crowd it."""
    rng = random.Random(seed)
    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for r in sorted(records, key=lambda r: r.key):
        groups[stratum(r)].append(r.key)
    queues = []
    for k in sorted(groups):
        keys = groups[k]
        rng.shuffle(keys)
        queues.append(keys)
    out: list[str] = []
    while len(out) < size and any(queues):
        for q in queues:
            if q and len(out) < size:
                out.append(q.pop())
    rng.shuffle(out)  # the order people see: no stratum in a row
    return out
