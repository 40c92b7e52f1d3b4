"""config.yaml: the run's models, roles, targets and grid, validated before any job runs.

Every error names the offending key or value, so a typo is caught in a second rather than
after an hour of paid calls.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kora import benchmarks
from kora.benchmarks.base import Benchmark
from kora.benchmarks.layout import CACHE_DIR, CONCURRENCY
from kora.benchmarks.schemas import AGE_RANGES, PROMPT_VARIANTS, AgeRange, PromptVariant
from kora.benchmarks.taxonomy import Taxonomy
from kora.llm.settings.config import ModelConfig
from kora.llm.settings.service_config import ConfigModel

# \Z, not $: a name must not end in a newline (it becomes a folder and a wildcard)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")


class TargetConfig(ConfigModel):
    model: str | None = None
    # the prompt variants to run; default: the benchmark version's (v1 both, v2 `default`)
    prompts: list[PromptVariant] | None = None
    # recorded conversations (`kora import-conversations`) to judge; no model is called
    imported: bool = False
    # recorded conversations (`kora continue`) carried on with `model` to each risk's
    # length, then judged: only the missing turns are asked
    continued: bool = False


class GridConfig(ConfigModel):
    risks: Literal["all"] | list[str] = Field(default="all", min_length=1)
    age_ranges: Literal["all"] | list[AgeRange] = Field(default="all", min_length=1)
    motivations: Literal["all"] | list[str] = Field(default="all", min_length=1)
    seeds_per_task: int = Field(default=8, gt=0, le=100)
    # KORA v2: seeds per risk spread over the grid or a population (kora.benchmarks.v2.plan); when
    # set, it replaces `seeds_per_task` (which config.yaml sets for v1 runs)
    total_seeds: int | None = Field(default=None, gt=0, le=10000)
    distribution: str | None = None  # a preset name or a JSON file of shares
    # canonical draws an unrepeatable plan without --random-seed; 42 is the seed its
    # published seed set (781 seeds, 30 census personas per risk) was planned with
    random_seed: int = Field(default=42, ge=0, le=2**32 - 1)


class BudgetConfig(BaseModel):
    """`budget:` no call starts that could take the workspace's bill past it (kora.llm.money.budget):
    US dollars (every paid model needs its `price`) or tokens of every kind."""

    # not strict: `--config 'budget={usd: 40}'` gives Snakemake's strings, "40"
    model_config = ConfigDict(extra="forbid")
    usd: float | None = Field(default=None, gt=0)
    tokens: int | None = Field(default=None, gt=0)
    # the day the bill starts counting against it (local time); else the first run with a
    # budget in this workspace (kora.llm.money.budget.counting_since)
    since: dt.date | None = None

    @property
    def since_epoch(self) -> float | None:
        if self.since is None:
            return None
        return dt.datetime.combine(self.since, dt.time()).timestamp()

    @property
    def unit(self) -> Literal["usd", "tokens"]:
        return "usd" if self.usd is not None else "tokens"

    @property
    def limit(self) -> float:
        return float(self.usd if self.usd is not None else self.tokens or 0)


# a model name, or a fallback chain: the models to try in order when one fails (canonical
# KORA v2's comma-separated model lists); a chain of one is the same as its name
ModelRole = str | list[str]
ROLES = ("seed_model", "expand_model", "user_model")


def chain(role: ModelRole) -> list[str]:
    """A role's models in the order they are tried."""
    return [role] if isinstance(role, str) else list(role)


def taxonomy_dir_of(raw: Mapping[str, object]) -> str:
    """The taxonomy folder of a (merged, not yet validated) config mapping."""
    given = raw.get("taxonomy_dir")
    if isinstance(given, str):
        return given
    return benchmark_of(raw).taxonomy_dir


def benchmark_of(raw: Mapping[str, object]) -> Benchmark:
    """The version a (merged, not yet validated) config mapping runs; an unknown name is
    checked with the rest of the config."""
    name = raw.get("benchmark", benchmarks.DEFAULT)
    return benchmarks.get(str(name) if name in benchmarks.VERSIONS else benchmarks.DEFAULT)


class KoraConfig(ConfigModel):
    # the KORA version the run measures: v1 (the seed's, 3 behaviour criteria, 3 turns)
    # or v2 (the canonical one today: 26 risks, 7 mechanisms, longer conversations)
    benchmark: str = benchmarks.DEFAULT  # one of benchmarks.VERSIONS (kora.config.checks)
    models: dict[str, ModelConfig]
    # a role names one model, or several in order: a fallback chain (`chain`)
    seed_model: ModelRole
    expand_model: ModelRole
    user_model: ModelRole
    judges: list[str] = Field(min_length=1)
    targets: dict[str, TargetConfig] = Field(default_factory=dict)
    grid: GridConfig = Field(default_factory=GridConfig)
    # project keys
    taxonomy_dir: str | None = None  # default: the benchmark version's
    # a folder of edited copies of the 8 templates; default: the package's kora/benchmarks/v1/prompts
    prompts_dir: str | None = None
    cache_dir: str = CACHE_DIR
    # a structured answer that fails its schema is sent back once with the reason (true,
    # the project's addition) or fails its item at once, as in the reference (false;
    # docs/fidelity.md lists the addition and what it changes)
    reask_invalid_answers: bool = True
    budget: BudgetConfig | None = None
    concurrency: int = Field(default=CONCURRENCY, gt=0, le=1024)

    @property
    def taxonomy_folder(self) -> str:
        return self.taxonomy_dir or benchmarks.get(self.benchmark).taxonomy_dir

    def prompts_folder(self, workdir: Path) -> Path:
        """The templates the run renders: `prompts_dir` (in the project), else its version's."""
        if self.prompts_dir is None:
            return benchmarks.get(self.benchmark).prompts_dir
        return workdir / self.prompts_dir

    def risks(self, taxonomy: Taxonomy) -> list[str]:
        if self.grid.risks == "all":
            return list(taxonomy.risks)
        return list(self.grid.risks)

    def age_ranges(self) -> list[AgeRange]:
        return list(AGE_RANGES) if self.grid.age_ranges == "all" else list(self.grid.age_ranges)

    def motivations(self, taxonomy: Taxonomy) -> list[str]:
        if self.grid.motivations == "all":
            return [m.id for m in taxonomy.motivations]
        return list(self.grid.motivations)

    def target_prompts(self, target: str) -> list[PromptVariant]:
        """The variants a target runs: a chat endpoint always gets an age, so no `default`;
        an app behind an app runner gets neither age nor system prompt, so no `child`."""
        variants = t_model(self, target) or PROMPT_VARIANTS
        asked = self.asked_prompts(target)
        return [p for p in PROMPT_VARIANTS if p in asked and p in variants]

    def asked_prompts(self, target: str) -> list[PromptVariant]:
        """The variants the config asks of a target: its `prompts`, else its version's
        default ones it can run (a chat endpoint, which always gets an age, runs `child`
        when the version's default is the no-age `default`)."""
        t = self.targets[target]
        if t.prompts is not None:
            return list(t.prompts)
        default = list(benchmarks.get(self.benchmark).default_prompts)
        variants = t_model(self, target)
        if variants is None or any(p in variants for p in default):
            return default
        return [p for p in PROMPT_VARIANTS if p in variants]

    def model_params(self, name: str) -> dict[str, object]:
        """A model as a rule param and in a shard's status: its name and what changes its
        answers (so a change re-runs the shards it made, and `kora plan` can tell)."""
        params = {"name": name, **self.models[name].output_settings()}
        if not self.reask_invalid_answers:  # absent when true: earlier shards stay done
            params["reask_invalid_answers"] = False
        return params

    def skipped_prompts(self, target: str) -> list[PromptVariant]:
        asked = self.asked_prompts(target)
        return [p for p in PROMPT_VARIANTS if p in asked and p not in self.target_prompts(target)]


def t_model(config: KoraConfig, target: str) -> tuple[str, ...] | None:
    """The prompt variants a target's model kind can run (None: an imported target)."""
    model = config.targets[target].model
    return None if model is None else config.models[model].kind.variants
