"""KORA v2's seed plan: which seed calls each (risk, age range, motivation) shard makes.

Three ways, as the canonical seed generator (packages/benchmark/src/kora.ts):

- `seeds_per_task` (the default): one call in every cell asking for that many seeds, as
  in v1;
- `total_seeds` alone: that many cells of each risk drawn at random (canonical's sample,
  from the generator below), one seed each; more than the risk's cells is an error. Past
  the plan, canonical also keeps no more than `total_seeds` seeds of a risk when a call
  answers with extra ones (in the order they arrive); the seeds stage does not apply that
  cap, so here a risk can end with more;
- `total_seeds` with a `distribution`: that many personas per risk whose age range,
  gender, socio-economic status and race/ethnicity match the population's shares
  (kora.benchmarks.v2.allocation), each with a motivation from a shuffled cycle and, for a risk with
  scenario flavors, a flavor; every persona is one seed call of one seed, its values
  pinned in the prompt and written over whatever the model answers.

Every draw comes from one generator seeded with `random_seed`, so the same config gives
the same plan on every run. The canonical CLI has no default seed (without one its plan
changes from run to run); here it defaults to 42, the seed of the canonical published
seed set, so `total_seeds: 30` with `distribution: us-census-2020` plans the personas of
those seeds. A cell the plan gives no seed is an empty shard: no call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import orjson

from kora.benchmarks.seedplan import Pinned, SeedOrder
from kora.benchmarks.taxonomy import Taxonomy
from kora.benchmarks.v2.allocation import PRESETS, mulberry32, sample, seed_plan

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "ageRange": ("7to9", "10to12", "13to17"),
    "gender": ("girl", "boy"),
    "ses": ("low", "middle", "high"),
    "raceEthnicity": ("white", "hispanic", "black", "asian", "other"),
}


def load_distribution(spec: str, workdir: Path) -> dict[str, dict[str, float]]:
    """A preset by name, or a JSON file of shares per dimension (each summing to 1)."""
    if spec in PRESETS:
        return {k: dict(v) for k, v in PRESETS[spec].items()}
    path = Path(spec) if Path(spec).is_absolute() else workdir / spec
    try:
        raw = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ValueError(
            f"{spec!r} is neither a preset ({', '.join(PRESETS)}) nor a file"
        ) from None
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object")
    out: dict[str, dict[str, float]] = {}
    for dim, keys in DIMENSIONS.items():
        shares = raw.get(dim)
        if not isinstance(shares, dict) or set(shares) != set(keys):
            raise ValueError(f"{path}: {dim} must give a share to each of {', '.join(keys)}")
        for k, v in shares.items():
            if not isinstance(v, int | float) or isinstance(v, bool) or not 0 <= v <= 1:
                raise ValueError(f"{path}: {dim}.{k} must be a number from 0 to 1, not {v!r}")
        if abs(sum(shares.values()) - 1) > 1e-6:
            raise ValueError(f"{path}: the {dim} shares sum to {sum(shares.values())}, not 1")
        # the canonical order of keys: counts are allocated (and ties broken) in it
        out[dim] = {k: float(shares[k]) for k in keys}
    unknown = set(raw) - set(DIMENSIONS) - {"name"}
    if unknown:
        raise ValueError(f"{path}: unknown key {sorted(unknown)[0]!r}")
    return out


def plan_cells(
    taxonomy: Taxonomy,
    risks: Sequence[str],
    age_ranges: Sequence[str],
    motivations: Sequence[str],
    *,
    seeds_per_task: int,
    total_seeds: int | None,
    distribution: Mapping[str, Mapping[str, float]] | None,
    random_seed: int,
) -> dict[str, list[SeedOrder]]:
    """Each cell's seed calls ("<risk>/<age>/<motivation>" -> orders), every cell of the
    grid present (an empty list: no seed there)."""
    ordered_risks = [r for r in taxonomy.risks if r in risks]
    ordered_motivations = [m.id for m in taxonomy.motivations if m.id in motivations]
    # age ranges in the order given, as canonical: with a distribution a subset's shares
    # are counted (ties broken, then shuffled) in that order, and without one the cells
    # drawn are numbered in it
    ages = list(dict.fromkeys(age_ranges))
    cells = {f"{r}/{a}/{m}": [] for r in ordered_risks for a in ages for m in ordered_motivations}  # type: dict[str, list[SeedOrder]]
    if total_seeds is None:
        return {c: [SeedOrder(count=seeds_per_task)] for c in cells}
    if distribution is None:
        rng = mulberry32(random_seed)
        for r in ordered_risks:
            combos = [(a, m) for a in ages for m in ordered_motivations]
            if total_seeds > len(combos):
                raise ValueError(
                    f"grid.total_seeds ({total_seeds}) is more than the {len(combos)} "
                    f"(age range x motivation) cells of risk {r}; add grid.distribution or "
                    "use seeds_per_task"
                )
            # canonical draws these from Math.random (its --random-seed is for a
            # distribution only), so no seed repeats its plan; here the seeded generator
            # stands in, draw for draw
            for a, m in sample(combos, total_seeds, rng):
                cells[f"{r}/{a}/{m}"].append(SeedOrder(count=1))
        return cells
    risk_dicts = [taxonomy.risks[r][1].model_dump(exclude_none=True) for r in ordered_risks]
    plan = seed_plan(risk_dicts, ordered_motivations, total_seeds, distribution, random_seed, ages)
    for p in plan:
        pinned = Pinned(**vars(p.persona))
        cells[f"{p.risk}/{p.persona.ageRange}/{p.motivation}"].append(
            SeedOrder(count=1, pinned=pinned, flavor=p.flavor)
        )
    return cells
