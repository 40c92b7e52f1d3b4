"""What a version of KORA is, behind one interface: every stage, the report and the commands
ask the run's `Benchmark` instead of comparing version names.

A version holds its prompts (a folder of templates), its answer schemas, its taxonomy
files, how it plans seeds, how many turns a conversation has (its taxonomy says), which
prompt variants a target runs by default, what the judge grades beside safety and how
verdicts combine, and how per-test results reduce into results.json. A new version is a
new folder beside v1/ and v2/ with a subclass of `Benchmark`, named in
`kora.benchmarks.VERSIONS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from kora.benchmarks.schemas import PromptVariant

if TYPE_CHECKING:
    from kora.benchmarks.asking import Question
    from kora.benchmarks.outcomes import Conversation, Judgment
    from kora.benchmarks.schemas import Risk, Scenario, ScenarioSeed, ScenarioValidation
    from kora.benchmarks.seedplan import SeedOrder
    from kora.benchmarks.taxonomy import Shard, Taxonomy
    from kora.benchmarks.templates import Rendered
    from kora.llm.client import ModelClient

# the project folder of a checkout: a version's taxonomy lives under its data/
PROJECT = Path(__file__).resolve().parents[2]
# the grid's (risks, age ranges, motivations) a seed plan covers
Cells = tuple[Sequence[str], Sequence[str], Sequence[str]]


# a version's judging: a conversation, its judges and the taxonomy in, the judgment out
Judging = Callable[["Conversation", "Sequence[ModelClient]", "Taxonomy"], Awaitable["Judgment"]]


class Benchmark(ABC):
    name: ClassVar[str]
    # where a run of this version keeps what it makes, relative to the project: two
    # versions never share a folder, so their shards and results cannot mix
    data_dir: ClassVar[str]
    results_dir: ClassVar[str]
    logs_dir: ClassVar[str]
    taxonomy_dir: ClassVar[str]  # the default taxonomy folder
    # the templates the judges render: v1 grades behaviours, v2 mechanisms
    judge_templates: ClassVar[tuple[str, ...]]
    default_prompts: ClassVar[tuple[PromptVariant, ...]]
    # grid keys that belong to other versions: an error in this one's run
    foreign_grid_keys: ClassVar[tuple[str, ...]] = ()
    # results.json and summary.json keys that say which version made them
    stamp: ClassVar[Mapping[str, str]] = {}
    # the report's section on the graded behaviours: its title and what it says
    criteria_title: ClassVar[str]
    criteria_note: ClassVar[str]
    # judge calls per judge and test
    judge_calls: ClassVar[int] = 2

    @property
    def stage_templates(self) -> Mapping[str, tuple[str, ...]]:
        """The templates each stage renders (rule inputs: an edit re-runs exactly its
        users)."""
        return {
            "seeds": ("seeds",),
            "scenarios": ("scenario", "validate", "first_user_message"),
            "conversations": ("target_system", "next_user_message"),
            "judgments": self.judge_templates,
        }

    @property
    def prompts_dir(self) -> Path:
        """The package's templates of this version."""
        return Path(__file__).parent / self.name / "prompts"

    @cached_property
    def stems(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for stems in self.stage_templates.values() for s in stems))

    def describe(self) -> str:
        return f"KORA {self.name}"

    # --- taxonomy --------------------------------------------------------------------

    def taxonomy_paths(self, directory: Path | str) -> list[Path]:
        """The files of a taxonomy folder: risks.json and motivations.json (the folder's
        own, or its parent's: a later version may keep an earlier one's motivations)."""
        from kora.benchmarks.taxonomy import taxonomy_paths

        return taxonomy_paths(directory)[:2]

    def load_taxonomy(self, files: Sequence[Path]) -> Taxonomy:
        from kora.benchmarks.taxonomy import load_taxonomy_files

        named = {p.name: p for p in files}
        return load_taxonomy_files(named["risks.json"], named["motivations.json"])

    def taxonomy_problem(self, taxonomy: Taxonomy, folder: str) -> str | None:
        """Why a loaded taxonomy cannot serve this version, or None."""
        return None

    @cached_property
    def taxonomy(self) -> Taxonomy:
        """The project's own taxonomy of this version."""
        return self.load_taxonomy(self.taxonomy_paths(PROJECT / self.taxonomy_dir))

    # --- criteria --------------------------------------------------------------------

    @property
    @abstractmethod
    def criteria(self) -> tuple[str, ...]:
        """What the judge grades beside safety, in the order results list them."""

    @property
    def criterion_labels(self) -> dict[str, str]:
        return {"safety": "Safety"}

    @property
    def conditional(self) -> frozenset[str]:
        """Criteria with a precondition: a conversation may leave them not triggered."""
        return frozenset()

    def recognises(self, test: Mapping[str, object]) -> bool:
        """Whether a per-test result (the project's or the reference's) is this version's."""
        return False

    # --- seeds -------------------------------------------------------------------------

    def check_grid(self, grid: Any, workdir: Path) -> tuple[str, str] | None:
        """(key, message) of a grid setting this version cannot run, or None."""
        return None

    def seed_plan(
        self, taxonomy: Taxonomy, cells: Cells, grid: Any, workdir: Path
    ) -> dict[str, list[SeedOrder]] | None:
        """Each cell's planned seed calls, or None: one call a cell for seeds_per_task."""
        return None

    @property
    @abstractmethod
    def seed_schema(self) -> type[BaseModel]:
        """The seed call's answer: {"seeds": [...]}."""

    def seed_variables(self, risk: Risk, order: SeedOrder | None) -> dict[str, Any]:
        """What the seed prompt is told beyond the cell and the count."""
        return {}

    def seed_question(
        self, shard: Shard, taxonomy: Taxonomy, count: int, order: SeedOrder | None = None
    ) -> Question:
        """The seed call of a cell (or of one planned order of it)."""
        from kora.benchmarks.asking import Question
        from kora.benchmarks.templates import render

        category = taxonomy.category_of(shard.risk_id)
        risk = taxonomy.risk(category.id, shard.risk_id)
        prompt = render(
            "seeds",
            category=category,
            risk=risk,
            age_range=shard.age_range,
            motivation=taxonomy.motivations_by_id[shard.motivation_id],
            count=count,
            **self.seed_variables(risk, order),
        )
        hints: dict[str, object] = {"count": count, "age_range": shard.age_range}
        return Question(prompt, self.seed_schema, "seeds", hints)

    def seed_fields(
        self, fields: dict[str, Any], risk: Risk, order: SeedOrder | None
    ) -> dict[str, Any]:
        """A seed as the model wrote it, with what the plan pins written over it."""
        return fields

    # --- scenarios -----------------------------------------------------------------------

    @abstractmethod
    def scenario_schema(self, risk: Risk) -> type[BaseModel]: ...

    @property
    @abstractmethod
    def validation_schema(self) -> type[ScenarioValidation]: ...

    def scenario_variables(self, seed: ScenarioSeed, risk: Risk) -> dict[str, Any]:
        """What the expansion prompt is told beyond the seed and its risk."""
        return {}

    @property
    @abstractmethod
    def safety_schema(self) -> type[BaseModel]:
        """The safety judge's answer."""

    # --- judging -------------------------------------------------------------------------

    @property
    @abstractmethod
    def judging(self) -> Judging:
        """How every judge's verdict on a conversation is asked and combined: the version's
        own judge module's, imported when a job first judges, not with the run (its
        stage calls it directly: docs/architecture.md)."""

    # --- results -------------------------------------------------------------------------

    @abstractmethod
    def aggregate(
        self, files: Sequence[Path], taxonomy: Taxonomy | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(scores, failed groups) of per-test result files, in the results' order."""

    @abstractmethod
    def check_scores(self, scores: Sequence[Mapping[str, object]]) -> None:
        """Raise if the scores do not have this version's results shape (a bug of ours)."""

    @abstractmethod
    def tallies(self, scores: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int, int]]:
        """Per criterion, safety first: (failing, exemplary, graded) over all tests, from
        results.json's sums."""

    # `kora aggregate` keeps the groups in the order the reference's files list them
    # (canonical v2 reduces in first-seen order), rather than in taxonomy order
    reference_order: ClassVar[bool] = False

    # --- the prompts as rendered ---------------------------------------------------------

    @abstractmethod
    def judge_showcase(
        self, scenario: Scenario, taxonomy: Taxonomy, transcript: str
    ) -> list[Rendered]:
        """The judge prompts beside safety's (and any variant only this version has), as
        rendered for one scenario (`kora prompts`)."""

    @property
    @abstractmethod
    def rendered_intro(self) -> str: ...
