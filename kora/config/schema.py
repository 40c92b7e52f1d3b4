"""config.yaml: the run's models, roles, targets and grid, validated before any job runs.

Every error names the offending key or value, so a typo is caught in a second rather than
after an hour of paid calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NoReturn
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kora import benchmarks
from kora.benchmarks.base import Benchmark
from kora.benchmarks.schemas import AGE_RANGES, PROMPT_VARIANTS, AgeRange, PromptVariant
from kora.benchmarks.taxonomy import Taxonomy
from kora.errors import ConfigError
from kora.llm.config import ModelConfig
from kora.llm.registry import KINDS
from kora.llm.service_config import template_problems
from kora.llm.structured import config_problem as structured_problem

PROVIDERS = tuple(KINDS)
# \Z, not $: a name must not end in a newline (it becomes a folder and a wildcard)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")


class _Strict(BaseModel):
    # strict: YAML gives real types, and `seeds_per_task: true` must not pass for 1
    model_config = ConfigDict(extra="forbid", strict=True)


class TargetConfig(_Strict):
    model: str | None = None
    # the prompt variants to run; default: the benchmark version's (v1 both, v2 `default`)
    prompts: list[PromptVariant] | None = None
    # recorded conversations (`kora import-conversations`) to judge; no model is called
    imported: bool = False
    # recorded conversations (`kora continue`) carried on with `model` to each risk's
    # length, then judged: only the missing turns are asked
    continued: bool = False


class GridConfig(_Strict):
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


# a model name, or a fallback chain: the models to try in order when one fails (canonical
# KORA v2's comma-separated model lists); a chain of one is the same as its name
ModelRole = str | list[str]
ROLES = ("seed_model", "expand_model", "user_model")


def chain(role: ModelRole) -> list[str]:
    """A role's models in the order they are tried."""
    return [role] if isinstance(role, str) else list(role)


def taxonomy_dir_of(raw: dict[str, Any]) -> str:
    """The taxonomy folder of a (merged, not yet validated) config mapping."""
    given = raw.get("taxonomy_dir")
    if isinstance(given, str):
        return given
    return benchmark_of(raw).taxonomy_dir


def benchmark_of(raw: dict[str, Any]) -> Benchmark:
    """The version a (merged, not yet validated) config mapping runs; an unknown name is
    checked with the rest of the config."""
    name = raw.get("benchmark", benchmarks.DEFAULT)
    return benchmarks.get(name if name in benchmarks.VERSIONS else benchmarks.DEFAULT)


class KoraConfig(_Strict):
    # the KORA version the run measures: v1 (the seed's, 3 behaviour criteria, 3 turns)
    # or v2 (the canonical one today: 26 risks, 7 mechanisms, longer conversations)
    benchmark: str = benchmarks.DEFAULT

    @field_validator("benchmark")
    @classmethod
    def _known_version(cls, name: str) -> str:
        if name not in benchmarks.VERSIONS:
            raise ValueError(f"unknown version, expected one of {', '.join(benchmarks.VERSIONS)}")
        return name

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
    cache_dir: str = ".kora/cache"
    concurrency: int = Field(default=16, gt=0, le=1024)

    @property
    def taxonomy_folder(self) -> str:
        return self.taxonomy_dir or benchmarks.get(self.benchmark).taxonomy_dir

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

    def model_params(self, name: str) -> dict[str, Any]:
        """A model as a rule param and in a shard's status: its name and what changes its
        answers (so a change re-runs the shards it made, and `kora plan` can tell)."""
        return {"name": name, **self.models[name].output_settings()}

    def role_params(self, role: ModelRole) -> dict[str, Any] | list[dict[str, Any]]:
        """A role's model as a rule param; a fallback chain as the list of its models (a
        chain of one is its model alone, so naming it either way changes nothing)."""
        names = chain(role)
        if len(names) == 1:
            return self.model_params(names[0])
        return [self.model_params(n) for n in names]

    def stage_models(self, stage: str, target: str | None = None) -> dict[str, Any]:
        """The models behind a stage's shards, by role."""
        if stage == "seeds":
            return {"seed": self.role_params(self.seed_model)}
        if stage == "scenarios":
            return {
                "expand": self.role_params(self.expand_model),
                "user": self.role_params(self.user_model),
            }
        if stage == "conversations":
            assert target is not None
            model = self.targets[target].model
            return {
                "target": None if model is None else self.model_params(model),
                "user": self.role_params(self.user_model),
            }
        return {"judges": [self.model_params(j) for j in self.judges]}

    def skipped_prompts(self, target: str) -> list[PromptVariant]:
        asked = self.asked_prompts(target)
        return [p for p in PROMPT_VARIANTS if p in asked and p not in self.target_prompts(target)]


def t_model(config: KoraConfig, target: str) -> tuple[str, ...] | None:
    """The prompt variants a target's model kind can run (None: an imported target)."""
    model = config.targets[target].model
    return None if model is None else config.models[model].kind.variants


def _loc(err: Any) -> str:
    return ".".join(str(p) for p in err["loc"])


def validate_config(
    raw: Any,
    taxonomy: Taxonomy,
    source: str = "config.yaml",
    *,
    workdir: Path | None = None,
    source_of: Callable[[str], str] | None = None,
) -> KoraConfig:
    """Check a merged config mapping; raise ConfigError naming the first problem.

    `source_of(loc)` names the file that set the key at `loc` (a dotted path), so an
    error in an overlay names the overlay; `workdir` resolves `prompts_dir` and
    `cache_dir` (checked only when given).
    """

    def fail(loc: str, text: str) -> NoReturn:
        where = source_of(loc) if source_of is not None else source
        raise ConfigError(f"{where}: {text}")

    if not isinstance(raw, dict):
        fail("", "expected a mapping at the top level")
    # an overlay removes a target of config.yaml by setting it to null
    if isinstance(raw.get("targets"), dict):
        raw = {**raw, "targets": {k: v for k, v in raw["targets"].items() if v is not None}}
    grid = raw.get("grid")
    if isinstance(grid, dict) and isinstance(grid.get("age_ranges"), list):
        for age in grid["age_ranges"]:
            if age not in AGE_RANGES:
                fail(
                    "grid.age_ranges",
                    f"grid.age_ranges: unknown age range {age!r} "
                    f"(expected one of {', '.join(AGE_RANGES)})",
                )
    try:
        cfg = KoraConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = _loc(err)
        if err["type"] == "extra_forbidden":
            fail(loc, f"unknown key {loc!r}")
        if err["type"] == "missing":
            fail(loc.rsplit(".", 1)[0] if "." in loc else "", f"missing required key {loc!r}")
        if loc.endswith(".provider") and err["type"] == "literal_error":
            fail(
                loc,
                f"{loc}: unknown provider {err['input']!r} "
                f"(expected one of {', '.join(PROVIDERS)})",
            )
        if "age_ranges" in loc and err["type"] == "literal_error":
            fail(
                loc,
                f"{loc}: unknown age range {err['input']!r} "
                f"(expected one of {', '.join(AGE_RANGES)})",
            )
        if "prompts" in loc and err["type"] == "literal_error":
            fail(loc, f"{loc}: unknown prompt variant {err['input']!r} (expected default or child)")
        # a union's errors name its branch ("grid.risks.list[str]"): name the key itself
        key = ".".join(p for p in loc.split(".") if "[" not in p and p != "literal")
        fail(key, f"{key}: {err['msg']} (got {err.get('input')!r})")

    for name, m in cfg.models.items():
        if not NAME_RE.match(name):
            fail(f"models.{name}", f"models: invalid model name {name!r}")
        kind = m.kind
        if kind.needs_model and not m.model:
            fail(f"models.{name}", f"models.{name}: provider {m.provider} needs `model`")
        if kind.needs_base_url and not m.base_url:
            fail(f"models.{name}", f"models.{name}: a {m.provider} model needs `base_url`")
        if kind.needs_app and not m.app:
            fail(f"models.{name}", f"models.{name}: an app-runner model needs `app`")
        if kind.described:
            if m.http is None:
                fail(f"models.{name}", f"models.{name}: an http model needs an `http` section")
            problems = template_problems(m.http, f"models.{name}.http")
            if problems:
                fail(problems[0].split(":", 1)[0], "\n".join(problems))
            relative = [
                s for s, r in m.http.requests().items() if not r.url.lstrip().startswith("http")
            ]
            if relative and not m.base_url:
                fail(
                    f"models.{name}",
                    f"models.{name}: http.{relative[0]}.url is relative; set `base_url`",
                )
        elif m.http is not None:
            fail(f"models.{name}.http", f"models.{name}.http: only for `provider: http`")
        if m.batch and not kind.batch:
            fail(
                f"models.{name}.batch",
                f"models.{name}.batch: batch mode is for anthropic and openai models",
            )
        if (found := structured_problem(name, m)) is not None:
            fail(*found)
        if m.app is not None and not kind.needs_app:
            fail(f"models.{name}.app", f"models.{name}.app: only for `provider: app-runner`")
        if m.base_url is not None:
            problem = _url_problem(m.base_url)
            if problem:
                loc = f"models.{name}.base_url"
                fail(loc, f"{loc}: {problem}: {m.base_url!r}")

    def need_model(role: str, name: str, *, llm: bool = True) -> None:
        loc = role.split("[", 1)[0]
        if name not in cfg.models:
            fail(
                loc,
                f"{role}: model {name!r} is not defined under `models` "
                f"(defined: {', '.join(sorted(cfg.models)) or 'none'})",
            )
        if llm and cfg.models[name].is_service:
            fail(loc, f"{role}: {name!r} is a chat service; it can only be a target")

    for role in ROLES:
        names = chain(getattr(cfg, role))
        if not names:
            fail(role, f"{role}: an empty list; name a model, or several to fall back on")
        for i, name in enumerate(names):
            need_model(role if isinstance(getattr(cfg, role), str) else f"{role}[{i}]", name)
        if len(set(names)) != len(names):
            fail(role, f"{role}: a model is listed twice in the fallback chain")
    for i, judge in enumerate(cfg.judges):
        need_model(f"judges[{i}]", judge)
    if len(set(cfg.judges)) != len(cfg.judges):
        fail("judges", "judges: a judge is listed twice")
    if len(cfg.judges) % 2 == 0:
        # as the canonical reference: an odd count gives every grade a true median
        fail(
            "judges",
            f"judges: {len(cfg.judges)} judges listed, but the number of judges must be odd "
            "so that the median grade is one judge's grade (add or remove one)",
        )
    for tname, target in cfg.targets.items():
        loc = f"targets.{tname}"
        if not NAME_RE.match(tname):
            fail(loc, f"targets: invalid target name {tname!r} (letters, digits, . _ -)")
        if target.model is None:
            if not target.imported:
                what = "the model the recordings were made with" if target.continued else ""
                fail(loc, f"{loc}: missing required key 'model' {what}".rstrip())
        else:
            need_model(f"{loc}.model", target.model, llm=False)
        if target.continued:
            if target.imported:
                fail(
                    f"{loc}.continued",
                    f"{loc}: `imported` judges recordings as they are, `continued` carries "
                    "them on with the target's model; set one of them",
                )
            problem = _history_problem(cfg.models[target.model]) if target.model else None
            if problem:
                fail(f"{loc}.continued", f"{loc}.continued: {target.model!r} {problem}")
        if target.prompts is not None and not target.prompts:
            fail(f"{loc}.prompts", f"{loc}.prompts: empty")
        if not cfg.target_prompts(tname):
            fail(
                f"{loc}.prompts",
                f"{loc}.prompts: a chat endpoint always receives an age, so it runs the "
                "`child` variant only; an app runner receives none, so it runs `default` "
                "only; add that variant",
            )

    if cfg.grid.risks != "all":
        for r in cfg.grid.risks:
            if r not in taxonomy.risks:
                fail("grid.risks", f"grid.risks: unknown risk id {r!r}")
    if cfg.grid.motivations != "all":
        for mid in cfg.grid.motivations:
            if mid not in taxonomy.motivations_by_id:
                fail(
                    "grid.motivations",
                    f"grid.motivations: unknown motivation id {mid!r} "
                    f"(expected one of {', '.join(taxonomy.motivations_by_id)})",
                )
    _check_benchmark(cfg, taxonomy, workdir, fail)
    if workdir is not None:
        problem = _cache_dir_problem(workdir, cfg.cache_dir)
        if problem:
            fail("cache_dir", f"cache_dir: {problem}")
        if cfg.prompts_dir is not None:
            problem = _prompts_dir_problem(workdir / cfg.prompts_dir, cfg.benchmark)
            if problem:
                fail("prompts_dir", f"prompts_dir: {problem}")
    return cfg


def _check_benchmark(
    cfg: KoraConfig,
    taxonomy: Taxonomy,
    workdir: Path | None,
    fail: Callable[[str, str], NoReturn],
) -> None:
    """What the run's version cannot run: another version's keys, a taxonomy it cannot
    use, a grid setting it refuses."""
    if cfg.benchmark not in benchmarks.VERSIONS:
        fail(
            "benchmark",
            f"benchmark: unknown version {cfg.benchmark!r} "
            f"(expected one of {', '.join(benchmarks.VERSIONS)})",
        )
    bm = benchmarks.get(cfg.benchmark)
    for key in bm.foreign_grid_keys:
        if getattr(cfg.grid, key) is not None:
            owner = next(
                benchmarks.get(n)
                for n in benchmarks.VERSIONS
                if key not in benchmarks.get(n).foreign_grid_keys
            )
            fail(
                f"grid.{key}",
                f"grid.{key}: a key of {owner.describe()}, not of {bm.describe()}; set "
                f"`benchmark: {owner.name}` to use it",
            )
    problem = bm.taxonomy_problem(taxonomy, cfg.taxonomy_folder)
    if problem:
        fail("benchmark", f"benchmark: {problem}")
    found = bm.check_grid(cfg.grid, workdir or Path("."))
    if found is not None:
        fail(found[0], f"{found[0]}: {found[1]}")


def _history_problem(model: ModelConfig) -> str | None:
    """Why a model cannot carry on a recorded conversation: a chat service that keeps its
    own sessions would answer the next message without the recorded ones."""
    if model.kind.keeps_sessions:
        return (
            f"is a {model.provider} service, which keeps each conversation on its side: "
            "a new session would not hold the recorded turns"
        )
    if model.kind.described and model.http is not None:
        turn = model.http.turn.model_dump_json()
        if not re.search(r"\{[{%][^}]*\bmessages\b", turn):
            return (
                "is a chat service whose turn request sends only the newest message "
                "(`{{ message }}`): to carry on a recording it must send `{{ messages }}`"
            )
    return None


def _url_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return "not an http(s) URL"
    if not parts.hostname:
        return "no host in the URL"
    return None


def _cache_dir_problem(workdir: Path, cache_dir: str) -> str | None:
    """The call store gets files written (and on a cluster, shared): never into a folder
    that holds other things, such as /, a home folder or the project itself."""
    where = (workdir / cache_dir).resolve()
    home = Path.home().resolve()
    if where == Path(where.anchor) or where == home or where in workdir.resolve().parents:
        return f"{cache_dir!r} is not a folder of its own ({where})"
    if where == workdir.resolve():
        return f"{cache_dir!r} is the project folder itself; use e.g. .kora/cache"
    return None


def _prompts_dir_problem(directory: Path, benchmark: str) -> str | None:
    if not directory.is_dir():
        return f"{directory} is not a folder"
    stems = benchmarks.get(benchmark).stems
    missing = [f"{s}.jinja" for s in stems if not (directory / f"{s}.jinja").is_file()]
    if missing:
        return f"{directory} lacks {', '.join(missing)}"
    return None
