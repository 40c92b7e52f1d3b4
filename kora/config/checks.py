"""config.yaml checked before any job runs: every error names the offending key or value
and the file that set it, so a typo is caught in a second rather than after an hour of
paid calls."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from kora import benchmarks
from kora.benchmarks.schemas import AGE_RANGES
from kora.benchmarks.taxonomy import Taxonomy
from kora.config.schema import NAME_RE, ROLES, KoraConfig, chain
from kora.config.urls import url_problem
from kora.errors import ConfigError
from kora.llm.config import ModelConfig
from kora.llm.service_config import template_problems
from kora.llm.structured import config_problem as structured_problem


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
        if loc.endswith(".provider") and err["type"] == "value_error":
            fail(loc, f"{loc}: {err['ctx']['error']}")
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
        if "reask_invalid_answers" in m.model_fields_set:
            loc = f"models.{name}.reask_invalid_answers"
            fail(loc, f"{loc}: a key of the whole run: set it at the top level")
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
        if m.base_url is not None and (problem := url_problem(m.base_url, m.kind)):
            fail(f"models.{name}.base_url", f"models.{name}.base_url: {problem}")
        for step, req in (m.http.requests() if m.http is not None else {}).items():
            if problem := url_problem(req.url, m.kind, template=True):
                loc = f"models.{name}.http.{step}.url"
                fail(loc, f"{loc}: {problem}")

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

    if cfg.budget is not None:
        b = cfg.budget
        if (b.usd is None) == (b.tokens is None):
            fail("budget", "budget: give one of `usd` (dollars) or `tokens`, e.g. {usd: 25}")
        if b.usd is not None:
            used = {n for role in ROLES for n in chain(getattr(cfg, role))} | set(cfg.judges)
            used |= {t.model for t in cfg.targets.values() if t.model is not None}
            models = {n: cfg.models[n] for n in used if n in cfg.models}
            unpriced = [n for n, m in models.items() if m.price is None and m.kind.billed]
            if unpriced:
                fail(
                    "budget",
                    f"budget: a budget in dollars needs a `price` on every paid model; "
                    f"{', '.join(sorted(unpriced))} has none (set it, or use "
                    "`budget: {tokens: N}`)",
                )

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
