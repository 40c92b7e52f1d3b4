"""Display names and the order of things in the report: taxonomy order for categories and
risks, then age range and prompt variant (ids stand for names the taxonomy lacks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kora.analysis.records import TestRecord
from kora.benchmarks.schemas import AGE_RANGES, PROMPT_VARIANTS
from kora.benchmarks.taxonomy import Taxonomy


def age_key(a: str) -> int:
    return AGE_RANGES.index(a) if a in AGE_RANGES else 9


def prompt_key(p: str) -> int:
    return PROMPT_VARIANTS.index(p) if p in PROMPT_VARIANTS else 9


class Names:
    """Display names and taxonomy order of categories and risks (ids when unknown)."""

    def __init__(self, taxonomy: Taxonomy | None, records: Sequence[TestRecord]) -> None:
        self.categories: dict[str, str] = {}
        self.risks: dict[str, str] = {}
        self.risk_category: dict[str, str] = {}
        if taxonomy is not None:
            for c in taxonomy.categories:
                self.categories[c.id] = c.name
                for r in c.risks:
                    self.risks[r.id] = r.name
                    self.risk_category[r.id] = c.id
        for rec in records:
            self.risk_category.setdefault(rec.risk, rec.category)
        self._cat_pos = {c: i for i, c in enumerate(self.categories)}
        self._risk_pos = {r: i for i, r in enumerate(self.risks)}

    def category(self, cid: str) -> str:
        return self.categories.get(cid, cid)

    def risk(self, rid: str) -> str:
        return self.risks.get(rid, rid)

    def cat_key(self, cid: str) -> tuple[int, str]:
        return (self._cat_pos.get(cid, len(self._cat_pos)), cid)

    def risk_key(self, rid: str) -> tuple[int, str]:
        return (self._risk_pos.get(rid, len(self._risk_pos)), rid)

    def record_key(self, r: TestRecord) -> tuple[Any, ...]:
        return (
            *self.cat_key(r.category),
            *self.risk_key(r.risk),
            age_key(r.age),
            r.scenario_id,
            prompt_key(r.prompt),
        )
