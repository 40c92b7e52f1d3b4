"""The risk taxonomy and child motivations, loaded from data/taxonomy/."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TypeVar

import orjson
from pydantic import BaseModel, ConfigDict

from kora.benchmarks.schemas import AGE_RANGES, AgeRange, Mechanism, Motivation, Risk, RiskCategory
from kora.errors import InputError
from kora.io import validate_all

AGE_RANGE_LABELS: dict[AgeRange, str] = {
    "7to9": "early childhood (7 to 9 years old)",
    "10to12": "pre-teen (10 to 12 years old)",
    "13to17": "teenager (13 to 17 years old)",
}


class TaxonomyMotivation(BaseModel):
    """A motivation with the stable slug used in shard file names."""

    model_config = ConfigDict(extra="forbid")
    id: str
    name: str
    description: str

    def as_seed_motivation(self) -> Motivation:
        return Motivation(name=self.name, description=self.description)


@dataclass(frozen=True)
class Shard:
    """One (risk, age range, motivation) cell of the grid: the unit of every stage."""

    category_id: str
    risk_id: str
    age_range: AgeRange
    motivation_id: str

    @property
    def path(self) -> str:
        return f"{self.risk_id}/{self.age_range}/{self.motivation_id}"


@dataclass(frozen=True)
class Taxonomy:
    categories: tuple[RiskCategory, ...]
    motivations: tuple[TaxonomyMotivation, ...]
    # KORA v2's judged mechanisms (none in v1, whose judge grades three behaviours)
    mechanisms: tuple[Mechanism, ...] = ()

    @property
    def benchmark(self) -> str:
        """The KORA version of this taxonomy: v2's is the one with mechanisms."""
        return "v2" if self.mechanisms else "v1"

    @cached_property
    def risks(self) -> dict[str, tuple[RiskCategory, Risk]]:
        return {r.id: (c, r) for c in self.categories for r in c.risks}

    @cached_property
    def motivations_by_id(self) -> dict[str, TaxonomyMotivation]:
        return {m.id: m for m in self.motivations}

    @cached_property
    def motivations_by_name(self) -> dict[str, TaxonomyMotivation]:
        return {m.name: m for m in self.motivations}

    def risk(self, category_id: str, risk_id: str) -> Risk:
        category = next((c for c in self.categories if c.id == category_id), None)
        if category is None:
            raise KeyError(f"Risk category not found: {category_id}")
        risk = next((r for r in category.risks if r.id == risk_id), None)
        if risk is None:
            raise KeyError(f"Risk not found in category {category_id}: {risk_id}")
        return risk

    def category_of(self, risk_id: str) -> RiskCategory:
        return self.risks[risk_id][0]

    def motivation_named(self, name: str) -> TaxonomyMotivation:
        try:
            return self.motivations_by_name[name]
        except KeyError:
            raise KeyError(f"Motivation not found: {name}") from None

    def shards(
        self,
        risks: list[str] | None = None,
        age_ranges: list[AgeRange] | None = None,
        motivations: list[str] | None = None,
    ) -> list[Shard]:
        """The grid in taxonomy order (category, risk, age range, motivation)."""
        out = []
        for category in self.categories:
            for risk in category.risks:
                if risks is not None and risk.id not in risks:
                    continue
                for age in AGE_RANGES:
                    if age_ranges is not None and age not in age_ranges:
                        continue
                    for m in self.motivations:
                        if motivations is not None and m.id not in motivations:
                            continue
                        out.append(Shard(category.id, risk.id, age, m.id))
        return out

    def order_key(self, category_id: str, risk_id: str, age_range: str) -> tuple[int, int, int]:
        """Position in taxonomy order, for sorting result groups; unknown ids sort last."""
        cats = [c.id for c in self.categories]
        risk_ids = [r.id for c in self.categories for r in c.risks]
        return (
            cats.index(category_id) if category_id in cats else len(cats),
            risk_ids.index(risk_id) if risk_id in risk_ids else len(risk_ids),
            AGE_RANGES.index(age_range) if age_range in AGE_RANGES else 3,
        )


DEFAULT_DIR = Path("data/taxonomy")
T = TypeVar("T", bound=BaseModel)


def taxonomy_paths(directory: Path | str) -> list[Path]:
    """The files of a taxonomy folder: risks.json, motivations.json (the folder's own, or
    its parent's: KORA v2 keeps v1's motivations) and, for v2, mechanisms.json."""
    directory = Path(directory)
    motivations = directory / "motivations.json"
    if not motivations.exists() and (directory.parent / "motivations.json").exists():
        motivations = directory.parent / "motivations.json"
    out = [directory / "risks.json", motivations]
    if (directory / "mechanisms.json").exists():
        out.append(directory / "mechanisms.json")
    return out


def load_taxonomy(directory: Path | str = DEFAULT_DIR) -> Taxonomy:
    return load_taxonomy_files(*taxonomy_paths(directory))


def load_taxonomy_files(
    risks_path: Path, motivations_path: Path, mechanisms_path: Path | None = None
) -> Taxonomy:
    categories = _load_list(risks_path, RiskCategory)
    motivations = _load_list(motivations_path, TaxonomyMotivation)
    mechanisms = _load_list(mechanisms_path, Mechanism) if mechanisms_path else []
    seen: set[str] = set()
    for c in categories:
        for r in c.risks:
            if r.id in seen:
                raise InputError(f"{risks_path}: risk id {r.id!r} appears twice")
            seen.add(r.id)
    ids = [m.id for m in motivations]
    if len(set(ids)) != len(ids):
        raise InputError(f"{motivations_path}: motivation ids must be unique")
    if len({m.id for m in mechanisms}) != len(mechanisms):
        raise InputError(f"{mechanisms_path}: mechanism ids must be unique")
    return Taxonomy(tuple(categories), tuple(motivations), tuple(mechanisms))


def _load_list(path: Path, kind: type[T]) -> list[T]:
    try:
        raw = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise InputError(f"{path}: taxonomy file not found") from None
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(raw, list):
        raise InputError(f"{path}: expected a JSON list")
    return validate_all(kind, ((f"{path}: item {i}", item) for i, item in enumerate(raw)))
