"""config.yaml checked before any job runs: every error names the offending key or value
and the file that set it, so a typo is caught in a second rather than after an hour of
paid calls."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from kora import benchmarks
from kora.benchmarks.layout import CACHE_DIR
from kora.benchmarks.schemas import AGE_RANGES
from kora.benchmarks.taxonomy import Taxonomy
from kora.config.schema import NAME_RE, ROLES, KoraConfig, chain
from kora.config.urls import url_problem
from kora.errors import ConfigError
from kora.llm.providers.structured import config_problem as structured_problem
from kora.llm.registry import KINDS
from kora.llm.settings.config import ModelConfig
from kora.llm.settings.service_config import template_problems


class _Problem(Exception):
    """What is wrong at the keys `locs` (dotted paths: they name the files that set them),
    said after `key`, the first of them unless given ("" : none)."""

    def __init__(self, locs: str | tuple[str, ...], text: str, key: str | None = None) -> None:
        self.locs = (locs,) if isinstance(locs, str) else locs
        key = self.locs[0] if key is None else key
        super().__init__(f"{key}: {text}" if key else text)


def validate_config(
    raw: object,
    taxonomy: Taxonomy,
    *,
    workdir: Path | None = None,
    source_of: Callable[[str], str] = lambda loc: "config.yaml",
) -> KoraConfig:
    """Check a merged config mapping; raise ConfigError naming the first problem.

    `source_of(loc)` names the file that set the key at `loc` (a dotted path), so an
    error in an overlay names the overlay; `workdir` resolves `prompts_dir` and
    `cache_dir` (checked only when given).
    """
    try:
        cfg = _parsed(raw, taxonomy)
        _check_benchmark(cfg, taxonomy, workdir)
        for name, model in cfg.models.items():
            _check_model(name, model)
        _check_roles(cfg)
        for name in cfg.targets:
            _check_target(cfg, name)
        if workdir is not None:
            _check_cache_dir(workdir, cfg.cache_dir)
        if workdir is not None and cfg.prompts_dir is not None:
            _check_prompts_dir(workdir / cfg.prompts_dir, cfg.benchmark)
    except _Problem as p:
        files = dict.fromkeys(source_of(loc) for loc in p.locs)
        raise ConfigError(f"{' and '.join(files)}: {p}") from None
    return cfg


# what each of the grid's lists holds, named in an error
_GRID_LISTS = {"risks": "risk id", "age_ranges": "age range", "motivations": "motivation id"}


def _parsed(raw: object, taxonomy: Taxonomy) -> KoraConfig:
    """The mapping as a KoraConfig: the grid's ids checked first (against the taxonomy),
    then pydantic's checks, their errors in the project's words."""
    if not isinstance(raw, dict):
        raise _Problem("", "expected a mapping at the top level", key="")
    # an overlay removes a target of config.yaml by setting it to null
    if isinstance(raw.get("targets"), dict):
        raw = {**raw, "targets": {k: v for k, v in raw["targets"].items() if v is not None}}
    grid = raw["grid"] if isinstance(raw.get("grid"), dict) else {}
    known = {"risks": taxonomy.risks, "age_ranges": AGE_RANGES}
    known["motivations"] = taxonomy.motivations_by_id
    for key, what in _GRID_LISTS.items():
        value, loc = grid.get(key), f"grid.{key}"
        if isinstance(value, str) and value != "all":
            raise _Problem(loc, f"a list of {what}s, or `all` (got {value!r}; write [{value}])")
        for item in value if isinstance(value, list) else []:
            if isinstance(item, str) and item not in known[key]:
                raise _Problem(loc, f"unknown {what} {item!r}{_guess(item, known[key])}")
    try:
        return KoraConfig.model_validate(raw)
    except ValidationError as exc:
        # a list's own error, not that it is not the string `all`; an unknown key first:
        # a typo in a key's name leaves the key it meant missing too
        errs = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        raise _pydantic_problem(
            next((e for e in errs if "literal['all']" not in e["loc"]), errs[0])
        ) from None


def _pydantic_problem(err: ErrorDetails) -> _Problem:
    """A pydantic error in the project's words."""
    # a union's errors name its branch ("grid.risks.list[str]"): name the key itself
    loc = ".".join(str(p) for p in err["loc"] if "[" not in str(p) and p != "str")
    if err["type"] == "extra_forbidden":
        key = str(err["loc"][-1])
        return _Problem(loc, f"unknown key {loc!r}{_guess(key, _keys_beside(err['loc']))}", "")
    if err["type"] == "missing":
        return _Problem(loc.rpartition(".")[0], f"missing required key {loc!r}", "")
    if loc.endswith(".provider") and err["type"] == "value_error":
        return _Problem(loc, f"unknown provider {err['input']!r}{_guess(err['input'], KINDS)}")
    if "prompts" in loc and err["type"] == "literal_error":
        return _Problem(loc, f"unknown prompt variant {err['input']!r} (expected default or child)")
    said, value = _said(err), repr(err.get("input"))
    return _Problem(loc, said + ("" if value in said else f" (got {value})"))


def _guess(name: str, known: Iterable[str]) -> str:
    """' (did you mean 'x'?)" for a name one typo away from a known one; else, for a short
    list, ' (expected one of ...)'."""
    names = [str(k) for k in known]
    close = difflib.get_close_matches(name, names, n=1)
    if ":" in name:  # YAML reads `{usd:5}` as the key `usd:5`
        return f" (YAML reads `{name}` as a key: put a space after the colon)"
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (expected one of {', '.join(names)})" if len(names) <= 12 else ""


def unknown_target(name: str, defined: list[str]) -> str:
    """What to say of a target's name the config does not define (targets' names share
    their endings: only a close one is offered)."""
    near = difflib.get_close_matches(name, defined, n=1, cutoff=0.8)
    guess = f"; did you mean {near[0]!r}?" if near else ""
    return (
        f"no target {name!r} in the config (targets: {', '.join(defined) or 'none'}{guess}): "
        "add it under `targets:`, or give the --configfile that defines it"
    )


def unpriced_for_budget(cfg: KoraConfig, models: Iterable[str]) -> str | None:
    """Why a run that calls `models` is refused, when its budget is in dollars and a paid
    one of them has no price (the run's check before its first call, and check-config's)."""
    known = cfg.models
    unpriced = [n for n in sorted(models) if known[n].price is None and known[n].kind.billed]
    if cfg.budget is None or cfg.budget.unit != "usd" or not unpriced:
        return None
    return (
        "budget: a budget in dollars needs a `price` on every paid model the run calls; "
        f"{', '.join(unpriced)} has none (set it, or use `budget: {{tokens: N}}`)"
    )


def _keys_beside(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the config takes where `loc` (pydantic's) ends."""
    kind: object = KoraConfig
    for part in loc[:-1]:
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            kind = kind.model_fields[str(part)].annotation
        else:  # a mapping, `part` one of its keys
            kind = get_args(kind)[-1]
        if type(None) in get_args(kind):  # X | None: X
            kind = get_args(kind)[0]
    return list(kind.model_fields) if isinstance(kind, type) and issubclass(kind, BaseModel) else []


# pydantic's kinds of value, as a config's reader names them
_KINDS = {"dict": "a mapping of keys", "model": "a mapping of keys", "list": "a list",
          "string": "text", "int": "a whole number", "float": "a number",
          "bool": "true or false", "date": "a date (YYYY-MM-DD)"}  # fmt: skip


def _said(err: ErrorDetails) -> str:
    """A pydantic error's reason in the project's words."""
    kind = err["type"].split("_")[0]
    if err["type"].endswith(("_type", "_parsing")) and kind in _KINDS:
        return f"expected {_KINDS[kind]}"
    if err["type"] == "value_error":  # a validator's own words
        return str(err["ctx"]["error"])
    if err["type"] == "too_short":
        return f"should hold at least {err['ctx']['min_length']}"
    return str(err["msg"]).replace("Input should be", "should be")


def _check_model(name: str, m: ModelConfig) -> None:
    loc = f"models.{name}"
    if not NAME_RE.match(name):
        raise _Problem(loc, f"invalid model name {name!r}", key="models")
    if "reask_invalid_answers" in m.model_fields_set:
        raise _Problem(
            f"{loc}.reask_invalid_answers", "a key of the whole run: set it at the top level"
        )
    kind = m.kind
    if kind.needs_model and not m.model:
        raise _Problem(loc, f"provider {m.provider} needs `model`")
    if kind.needs_base_url and not m.base_url:
        raise _Problem(loc, f"a {m.provider} model needs `base_url`")
    if kind.needs_app and not m.app:
        raise _Problem(loc, "an app-runner model needs `app`")
    if kind.described:
        if m.http is None:
            raise _Problem(loc, "an http model needs an `http` section")
        problems = template_problems(m.http, f"{loc}.http")
        if problems:
            raise _Problem(problems[0].split(":", 1)[0], "\n".join(problems), key="")
        relative = [
            s for s, r in m.http.requests().items() if not r.url.lstrip().startswith("http")
        ]
        if relative and not m.base_url:
            raise _Problem(loc, f"http.{relative[0]}.url is relative; set `base_url`")
    elif m.http is not None:
        raise _Problem(f"{loc}.http", "only for `provider: http`")
    if m.batch and not kind.batch:
        raise _Problem(f"{loc}.batch", "batch mode is for anthropic and openai models")
    if (found := structured_problem(name, m)) is not None:
        raise _Problem(found[0], found[1], key="")
    if (faults := m.setting_problem()) is not None:
        raise _Problem(tuple(f"{loc}.{key}" for key in faults[0]), faults[1])
    if m.app is not None and not kind.needs_app:
        raise _Problem(f"{loc}.app", "only for `provider: app-runner`")
    if m.base_url is not None and (problem := url_problem(m.base_url, m.kind)):
        raise _Problem(f"{loc}.base_url", problem)
    for step, req in (m.http.requests() if m.http is not None else {}).items():
        if problem := url_problem(req.url, m.kind, template=True):
            raise _Problem(f"{loc}.http.{step}.url", problem)


def _need_model(cfg: KoraConfig, role: str, name: str, *, llm: bool = True) -> None:
    loc = role.split("[", 1)[0]
    if name not in cfg.models:
        guess = _guess(name, sorted(cfg.models))
        raise _Problem(loc, f"model {name!r} is not defined under `models`{guess}", key=role)
    if llm and cfg.models[name].is_service:
        raise _Problem(loc, f"{name!r} is a chat service; it can only be a target", key=role)


def _check_roles(cfg: KoraConfig) -> None:
    """Each role's models, the judges and the budget."""
    b = cfg.budget
    if b is not None and (b.usd is None) == (b.tokens is None):
        where = ("budget.usd", "budget.tokens") if b.usd is not None else "budget"
        raise _Problem(where, "give one of `usd` (dollars) or `tokens`, e.g. {usd: 25}", "budget")
    for role in ROLES:
        names = chain(getattr(cfg, role))
        if not names:
            raise _Problem(role, "an empty list; name a model, or several to fall back on")
        for i, name in enumerate(names):
            _need_model(cfg, role if isinstance(getattr(cfg, role), str) else f"{role}[{i}]", name)
        if len(set(names)) != len(names):
            raise _Problem(role, "a model is listed twice in the fallback chain")
    for i, judge in enumerate(cfg.judges):
        _need_model(cfg, f"judges[{i}]", judge)
    if len(set(cfg.judges)) != len(cfg.judges):
        raise _Problem("judges", "a judge is listed twice")
    if len(cfg.judges) % 2 == 0:
        # as the canonical reference: an odd count gives every grade a true median
        raise _Problem(
            "judges",
            f"{len(cfg.judges)} judges listed, but the number of judges must be odd "
            "so that the median grade is one judge's grade (add or remove one)",
        )


def _check_target(cfg: KoraConfig, name: str) -> None:
    target, loc = cfg.targets[name], f"targets.{name}"
    if not NAME_RE.match(name):
        raise _Problem(loc, f"invalid target name {name!r} (letters, digits, . _ -)", "targets")
    if target.model is None:
        if not target.imported:
            what = "the model the recordings were made with" if target.continued else ""
            raise _Problem(loc, f"missing required key 'model' {what}".rstrip())
    else:
        _need_model(cfg, f"{loc}.model", target.model, llm=False)
    if target.continued:
        if target.imported:
            raise _Problem(
                f"{loc}.continued",
                "`imported` judges recordings as they are, `continued` carries them on with "
                "the target's model; set one of them",
                key=loc,
            )
        problem = _history_problem(cfg.models[target.model]) if target.model else None
        if problem:
            raise _Problem(f"{loc}.continued", f"{target.model!r} {problem}")
    if target.prompts is not None and not target.prompts:
        raise _Problem(f"{loc}.prompts", "empty")
    if not cfg.target_prompts(name):
        raise _Problem(
            f"{loc}.prompts",
            "a chat endpoint always receives an age, so it runs the "
            "`child` variant only; an app runner receives none, so it runs `default` "
            "only; add that variant",
        )


def _check_benchmark(cfg: KoraConfig, taxonomy: Taxonomy, workdir: Path | None) -> None:
    """What the run's version cannot run: another version's keys, a taxonomy it cannot
    use, a grid setting it refuses."""
    if cfg.benchmark not in benchmarks.VERSIONS:
        guess = _guess(cfg.benchmark, benchmarks.VERSIONS)
        raise _Problem("benchmark", f"unknown version {cfg.benchmark!r}{guess}")
    bm = benchmarks.get(cfg.benchmark)
    for key in bm.foreign_grid_keys:
        if getattr(cfg.grid, key) is not None:
            owner = next(
                benchmarks.get(n)
                for n in benchmarks.VERSIONS
                if key not in benchmarks.get(n).foreign_grid_keys
            )
            raise _Problem(
                f"grid.{key}",
                f"a key of {owner.describe()}, not of {bm.describe()}; set "
                f"`benchmark: {owner.name}` to use it",
            )
    problem = bm.taxonomy_problem(taxonomy, cfg.taxonomy_folder)
    if problem:
        raise _Problem("benchmark", problem)
    found = bm.check_grid(cfg.grid, workdir or Path("."))
    if found is not None:
        raise _Problem(*found)


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


def _check_cache_dir(workdir: Path, cache_dir: str) -> None:
    """The call store gets files written (and on a cluster, shared): never into a folder
    that holds other things, such as /, a home folder or the project itself."""
    where = (workdir / cache_dir).resolve()
    home = Path.home().resolve()
    if where == Path(where.anchor) or where == home or where in workdir.resolve().parents:
        raise _Problem("cache_dir", f"{cache_dir!r} is not a folder of its own ({where})")
    if where == workdir.resolve():
        raise _Problem(
            "cache_dir", f"{cache_dir!r} is the project folder itself; use e.g. {CACHE_DIR}"
        )


def _check_prompts_dir(directory: Path, benchmark: str) -> None:
    if not directory.is_dir():
        raise _Problem("prompts_dir", f"{directory} is not a folder")
    stems = benchmarks.get(benchmark).stems
    missing = [f"{s}.jinja" for s in stems if not (directory / f"{s}.jinja").is_file()]
    if missing:
        raise _Problem("prompts_dir", f"{directory} lacks {', '.join(missing)}")
