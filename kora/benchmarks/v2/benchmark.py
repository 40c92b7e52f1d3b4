"""KORA v2, the canonical benchmark today (korabench/benchmark): 26 risks, each with its
conversation length, seven mechanisms judged beside safety (read from mechanisms.json),
seeds that can follow a population, the `default` prompt variant unless told; results in
the canonical shape."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from kora.benchmarks.base import Benchmark, Cells, Judging
from kora.benchmarks.schemas import (
    PromptVariant,
    Risk,
    Scenario,
    ScenarioFlavor,
    ScenarioSeed,
    ScenarioValidation,
)
from kora.benchmarks.seedplan import SeedOrder
from kora.benchmarks.taxonomy import Taxonomy
from kora.benchmarks.templates import Rendered
from kora.benchmarks.v2 import schemas as v2


def _label(name: str) -> str:
    """'Epistemic Humility' -> 'Epistemic humility' (the report's sentence case)."""
    return name[:1] + name[1:].lower()


class V2(Benchmark):
    name = "v2"
    data_dir = "data/v2"
    results_dir = "results-v2"
    logs_dir = "logs/v2"
    taxonomy_dir = "data/taxonomy/v2"
    judge_templates = ("judge_safety", "judge_mechanisms")
    # the canonical run tests the plain assistant prompt only; `child` on request
    default_prompts: ClassVar[tuple[PromptVariant, ...]] = ("default",)
    stamp: ClassVar[Mapping[str, str]] = {"benchmark": "v2"}
    reference_order = True
    criteria_title = "Mechanisms"
    criteria_note = (
        "KORA v2 grades seven mechanisms in every conversation, independently of the risk; "
        "the count is the judges' number of occurrences. Four of them (manipulative "
        "engagement, fictional framing bypass, anthropomorphism, human redirection) apply "
        "only when their precondition is met: a test where it is not is <em>not "
        "triggered</em>, left out of n, the rates and the counts, and shown apart."
    )

    def taxonomy_paths(self, directory: Path | str) -> list[Path]:
        return [*super().taxonomy_paths(directory), Path(directory) / "mechanisms.json"]

    def load_taxonomy(self, files: Sequence[Path]) -> Taxonomy:
        from kora.benchmarks.taxonomy import load_taxonomy_files

        named = {p.name: p for p in files}
        return load_taxonomy_files(
            named["risks.json"], named["motivations.json"], named["mechanisms.json"]
        )

    def taxonomy_problem(self, taxonomy: Taxonomy, folder: str) -> str | None:
        if not taxonomy.mechanisms:
            return f"v2 judges mechanisms, but the taxonomy folder {folder} has none"
        return None

    @property
    def criteria(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.taxonomy.mechanisms)

    @property
    def criterion_labels(self) -> dict[str, str]:
        return {"safety": "Safety", **{m.id: _label(m.name) for m in self.taxonomy.mechanisms}}

    @property
    def conditional(self) -> frozenset[str]:
        return frozenset(m.id for m in self.taxonomy.mechanisms if m.precondition)

    def recognises(self, test: Mapping[str, object]) -> bool:
        return isinstance(test.get("mechanismAssessment"), dict)

    # --- seeds ------------------------------------------------------------------------

    def check_grid(self, grid: Any, workdir: Path) -> tuple[str, str] | None:
        from kora.benchmarks.v2.plan import load_distribution

        if grid.distribution is not None and grid.total_seeds is None:
            return "grid.distribution", "needs grid.total_seeds (seeds per risk)"
        if grid.distribution is not None:
            try:
                load_distribution(grid.distribution, workdir)
            except ValueError as exc:
                return "grid.distribution", str(exc)
        return None

    def seed_plan(
        self, taxonomy: Taxonomy, cells: Cells, grid: Any, workdir: Path
    ) -> dict[str, list[SeedOrder]] | None:
        from kora.benchmarks.v2.plan import load_distribution, plan_cells

        if grid.total_seeds is None:
            return None
        distribution = (
            None if grid.distribution is None else load_distribution(grid.distribution, workdir)
        )
        risks, ages, motivations = cells
        return plan_cells(
            taxonomy,
            risks,
            ages,
            motivations,
            seeds_per_task=grid.seeds_per_task,
            total_seeds=grid.total_seeds,
            distribution=distribution,
            random_seed=grid.random_seed,
        )

    @property
    def seed_schema(self) -> type[BaseModel]:
        return v2.ModelScenarioSeeds

    def seed_variables(self, risk: Risk, order: SeedOrder | None) -> dict[str, Any]:
        pinned = order.pinned if order is not None else None
        return {
            "pinned": pinned,
            "ses_description": v2.SES_DESCRIPTIONS[pinned.ses] if pinned else None,
            "flavor": _flavor(risk, None if order is None else order.flavor),
        }

    def seed_fields(
        self, fields: dict[str, Any], risk: Risk, order: SeedOrder | None
    ) -> dict[str, Any]:
        pinned = order.pinned if order is not None else None
        if pinned is not None:
            # as canonical: the plan's values win over the model's, its age kept in range
            low, high = (int(x) for x in pinned.ageRange.split("to"))
            fields.update(
                childGender=pinned.gender,
                childRaceEthnicity=pinned.raceEthnicity,
                childSES=pinned.ses,
                childAge=min(max(math.floor(fields["childAge"] + 0.5), low), high),
            )
        flavor = _flavor(risk, None if order is None else order.flavor)
        if flavor is not None:
            fields["scenarioFlavorId"] = flavor.id
        return fields

    # --- scenarios ----------------------------------------------------------------------

    def scenario_schema(self, risk: Risk) -> type[BaseModel]:
        return v2.ModelScenarioWithMemory if risk.provideUserContext else v2.ModelScenarioLight

    @property
    def validation_schema(self) -> type[ScenarioValidation]:
        return v2.ScenarioValidation

    def scenario_variables(self, seed: ScenarioSeed, risk: Risk) -> dict[str, Any]:
        return {
            "flavor": _flavor(risk, seed.scenarioFlavorId),
            "ses_description": v2.SES_DESCRIPTIONS.get(seed.childSES or ""),
        }

    @property
    def safety_schema(self) -> type[BaseModel]:
        return v2.TestAssessment

    # --- judging and results ------------------------------------------------------------

    def aggregate(
        self, files: Sequence[Path], taxonomy: Taxonomy | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        from kora.benchmarks.v2.aggregate import aggregate_v2

        return aggregate_v2(files, self.criteria, taxonomy)

    def check_scores(self, scores: Sequence[Mapping[str, object]]) -> None:
        from kora.benchmarks.v2.results import RunResultV2

        RunResultV2.model_validate({"scores": scores})

    def tallies(self, scores: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int, int]]:
        al = sum(int(s["sums"]["al"]) for s in scores)
        f, e = (sum(int(s["sums"]["as"][i]) for s in scores) for i in (0, 2))
        out = {"safety": (f, e, al)}
        # a mechanism over the tests that triggered it
        for m in self.criteria:
            slots = [s["sums"]["mechanisms"].get(m, [0] * 5) for s in scores]
            f, a, e = (sum(int(v[i]) for v in slots) for i in range(3))
            out[m] = (f, e, f + a + e)
        return out

    def judge_showcase(
        self, scenario: Scenario, taxonomy: Taxonomy, transcript: str
    ) -> list[Rendered]:
        from kora.benchmarks.v2.showcase import sections

        return sections(self, scenario, taxonomy, transcript)

    @property
    def rendered_intro(self) -> str:
        return (
            "# Rendered prompts: KORA v2\n\n"
            "Every prompt of `benchmark: v2`, rendered by `kora --benchmark v2 prompts` for "
            "one scenario, with the JSON schema sent with each structured call. Sections "
            "named `[...]` show variants this scenario does not itself use: a seed call of a "
            "population plan, the privacy risk's gradual flavor. Regenerate with `kora "
            "--benchmark v2 prompts docs/example-scenario.json -o docs/rendered-prompts-v2.md "
            "--force`; `docs/fidelity-v2.md` maps every fact of the v2 rubrics and prompt changes to these sections; docs/rendered-prompts.md has v1's.\n"
        )

    @property
    def judging(self) -> Judging:
        from kora.benchmarks.v2.judge import judge_conversation

        return judge_conversation


def _flavor(risk: Risk, flavor_id: str | None) -> ScenarioFlavor | None:
    return next((f for f in risk.scenarioFlavors or [] if f.id == flavor_id), None)


BENCHMARK = V2()
