"""config.yaml: the run's models, roles, targets and grid, validated before any job runs.

Every error names the offending key or value, so a typo is caught in a second rather than
after an hour of paid calls.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kora.errors import ConfigError
from kora.schemas import AGE_RANGES, PROMPT_VARIANTS, AgeRange, PromptVariant
from kora.taxonomy import Taxonomy

PROVIDERS = ("anthropic", "openai", "chat-endpoint", "mock")
Provider = Literal["anthropic", "openai", "chat-endpoint", "mock"]
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Price(_Strict):
    """US dollars per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class ModelConfig(_Strict):
    provider: Provider
    model: str | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    base_url: str | None = None
    api_key_env: str | None = None
    requests_per_minute: float | None = Field(default=None, gt=0)
    max_concurrency: int | None = Field(default=None, gt=0)
    timeout: float | None = Field(default=None, gt=0)
    price: Price | None = None

    def output_settings(self) -> dict[str, Any]:
        """What changes a model's answers: rule params and cache keys use only these.

        Rate limits, timeouts, keys and (except for a chat endpoint, whose URL *is* the
        model under test) the base URL are transport settings and leave results valid.
        """
        out: dict[str, Any] = {"provider": self.provider, "model": self.model}
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.provider == "chat-endpoint":
            out["base_url"] = self.base_url
        return out


class TargetConfig(_Strict):
    model: str | None = None
    prompts: list[PromptVariant] = Field(default_factory=lambda: list(PROMPT_VARIANTS))
    # recorded conversations (`kora import-conversations`) to judge; no model is called
    imported: bool = False


class GridConfig(_Strict):
    risks: Literal["all"] | list[str] = "all"
    age_ranges: Literal["all"] | list[AgeRange] = "all"
    motivations: Literal["all"] | list[str] = "all"
    seeds_per_task: int = Field(default=8, gt=0, le=100)


class KoraConfig(_Strict):
    models: dict[str, ModelConfig]
    seed_model: str
    expand_model: str
    user_model: str
    judges: list[str] = Field(min_length=1)
    targets: dict[str, TargetConfig] = Field(default_factory=dict)
    grid: GridConfig = Field(default_factory=GridConfig)
    # project keys
    taxonomy_dir: str = "data/taxonomy"
    # a folder of edited copies of the 8 templates; default: the package's kora/prompts
    prompts_dir: str | None = None
    cache_dir: str = ".kora/cache"
    concurrency: int = Field(default=16, gt=0, le=1024)

    def model(self, name: str) -> ModelConfig:
        return self.models[name]

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
        """The variants a target runs: a chat endpoint always gets an age, so no `default`."""
        t = self.targets[target]
        prompts = [p for p in PROMPT_VARIANTS if p in t.prompts]
        if t.model is not None and self.models[t.model].provider == "chat-endpoint":
            prompts = [p for p in prompts if p != "default"]
        return prompts

    def skipped_prompts(self, target: str) -> list[PromptVariant]:
        asked = self.targets[target].prompts
        return [p for p in PROMPT_VARIANTS if p in asked and p not in self.target_prompts(target)]


def _loc(err: Any) -> str:
    return ".".join(str(p) for p in err["loc"])


def validate_config(raw: Any, taxonomy: Taxonomy, source: str = "config.yaml") -> KoraConfig:
    """Check a merged config mapping; raise ConfigError naming the first problem."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level")
    # an overlay removes a target of config.yaml by setting it to null
    if isinstance(raw.get("targets"), dict):
        raw = {**raw, "targets": {k: v for k, v in raw["targets"].items() if v is not None}}
    grid = raw.get("grid")
    if isinstance(grid, dict) and isinstance(grid.get("age_ranges"), list):
        for age in grid["age_ranges"]:
            if age not in AGE_RANGES:
                raise ConfigError(
                    f"{source}: grid.age_ranges: unknown age range {age!r} "
                    f"(expected one of {', '.join(AGE_RANGES)})"
                )
    try:
        cfg = KoraConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = _loc(err)
        if err["type"] == "extra_forbidden":
            raise ConfigError(f"{source}: unknown key {loc!r}") from None
        if err["type"] == "missing":
            raise ConfigError(f"{source}: missing required key {loc!r}") from None
        if loc.endswith(".provider") and err["type"] == "literal_error":
            raise ConfigError(
                f"{source}: {loc}: unknown provider {err['input']!r} "
                f"(expected one of {', '.join(PROVIDERS)})"
            ) from None
        if "age_ranges" in loc and err["type"] == "literal_error":
            raise ConfigError(
                f"{source}: {loc}: unknown age range {err['input']!r} "
                f"(expected one of {', '.join(AGE_RANGES)})"
            ) from None
        if "prompts" in loc and err["type"] == "literal_error":
            raise ConfigError(
                f"{source}: {loc}: unknown prompt variant {err['input']!r} "
                f"(expected default or child)"
            ) from None
        raise ConfigError(f"{source}: {loc}: {err['msg']} (got {err.get('input')!r})") from None

    for name, m in cfg.models.items():
        if not NAME_RE.match(name):
            raise ConfigError(f"{source}: models: invalid model name {name!r}")
        if m.provider in ("anthropic", "openai") and not m.model:
            raise ConfigError(f"{source}: models.{name}: provider {m.provider} needs `model`")
        if m.provider == "chat-endpoint" and not m.base_url:
            raise ConfigError(f"{source}: models.{name}: a chat-endpoint model needs `base_url`")
        if m.base_url and not re.match(r"^https?://", m.base_url):
            raise ConfigError(
                f"{source}: models.{name}.base_url: not an http(s) URL: {m.base_url!r}"
            )

    def need_model(role: str, name: str, *, llm: bool = True) -> None:
        if name not in cfg.models:
            raise ConfigError(
                f"{source}: {role}: model {name!r} is not defined under `models` "
                f"(defined: {', '.join(sorted(cfg.models)) or 'none'})"
            )
        if llm and cfg.models[name].provider == "chat-endpoint":
            raise ConfigError(
                f"{source}: {role}: {name!r} is a chat endpoint; it can only be a target"
            )

    need_model("seed_model", cfg.seed_model)
    need_model("expand_model", cfg.expand_model)
    need_model("user_model", cfg.user_model)
    for i, judge in enumerate(cfg.judges):
        need_model(f"judges[{i}]", judge)
    if len(set(cfg.judges)) != len(cfg.judges):
        raise ConfigError(f"{source}: judges: a judge is listed twice")
    if len(cfg.judges) % 2 == 0:
        # as the canonical reference: an odd count gives every grade a true median
        raise ConfigError(
            f"{source}: judges: {len(cfg.judges)} judges listed, but the number of judges must "
            "be odd so that the median grade is one judge's grade (add or remove one)"
        )
    for tname, target in cfg.targets.items():
        if not NAME_RE.match(tname):
            raise ConfigError(
                f"{source}: targets: invalid target name {tname!r} (letters, digits, . _ -)"
            )
        if target.model is None:
            if not target.imported:
                raise ConfigError(f"{source}: targets.{tname}: missing required key 'model'")
        else:
            need_model(f"targets.{tname}.model", target.model, llm=False)
        if not target.prompts:
            raise ConfigError(f"{source}: targets.{tname}.prompts: empty")
        if not cfg.target_prompts(tname):
            raise ConfigError(
                f"{source}: targets.{tname}.prompts: a chat endpoint always receives an age, "
                "so it runs the `child` variant only; add `child`"
            )

    if cfg.grid.risks != "all":
        for r in cfg.grid.risks:
            if r not in taxonomy.risks:
                raise ConfigError(f"{source}: grid.risks: unknown risk id {r!r}")
    if cfg.grid.motivations != "all":
        for mid in cfg.grid.motivations:
            if mid not in taxonomy.motivations_by_id:
                raise ConfigError(
                    f"{source}: grid.motivations: unknown motivation id {mid!r} "
                    f"(expected one of {', '.join(taxonomy.motivations_by_id)})"
                )
    return cfg


def load_config_file(path: Path | str) -> dict[str, Any]:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Snakemake's --configfile rule: nested mappings merge, other values replace."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def load_config(
    paths: list[Path | str], taxonomy: Taxonomy | None = None
) -> tuple[KoraConfig, Taxonomy]:
    """Merge config files left to right and validate (the CLI's view of a run)."""
    from kora.taxonomy import load_taxonomy

    raw: dict[str, Any] = {}
    for p in paths:
        raw = merge(raw, load_config_file(p))
    if taxonomy is None:
        taxonomy = load_taxonomy(raw.get("taxonomy_dir", "data/taxonomy"))
    return validate_config(raw, taxonomy, source=" + ".join(str(p) for p in paths)), taxonomy
