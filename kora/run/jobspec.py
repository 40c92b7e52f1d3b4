"""What a job is, as it travels: its rule and exactly that rule's declared files, params
and log, with the run-wide settings its calls need (`JobSpec`).

One builder (`JobSpec.of`) makes it from what Snakemake hands a rule's script, from the
jobs the run's start lists (for the broker's calls ahead and the progress line's count),
and from `kora plan`'s walk of the jobs a run would make. The standard library only: a
job's script imports this, and its start must stay cheap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any


def model_names(params: Any) -> set[str]:
    """Every model named in a rule's params (a mapping with `name` and `provider`)."""
    if isinstance(params, dict):
        if isinstance(params.get("name"), str) and "provider" in params:
            return {params["name"]}
        return {n for v in params.values() for n in model_names(v)}
    if isinstance(params, list | tuple):
        return {n for v in params for n in model_names(v)}
    return set()


def run_settings(config: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The run-wide settings of the job: its models' settings in the config, by the names
    its params give (what carries their calls is taken from them:
    kora.llm.config.ModelConfig.of_job)."""
    models = config.get("models") or {}
    return {
        "models": {n: models.get(n) or {} for n in sorted(model_names(params))},
        "cache_dir": str(config.get("cache_dir", ".kora/cache")),
        "concurrency": int(config.get("concurrency", 16)),
        # a cap on the bill (kora.llm.budget): it never changes an answer; its `since`, a
        # date when YAML gave one, as JSON writes it
        "budget": _plain(config.get("budget")) or None,
    }


def _plain(value: Any) -> Any:
    """A config value as JSON holds it (a YAML date as its ISO text)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.isoformat() if hasattr(value, "isoformat") else value


def _files(named: Any) -> dict[str, Any]:
    """A rule's named files (Snakemake's Namedlist, or a mapping) as {name: path or [paths]}."""
    return {
        name: str(value) if isinstance(value, str) else [str(v) for v in value]
        for name, value in named.items()
    }


@dataclass(frozen=True)
class JobSpec:
    rule: str
    input: dict[str, Any]
    output: dict[str, Any]
    params: dict[str, Any]
    log: list[str]
    settings: dict[str, Any]

    @classmethod
    def of(
        cls, rule: str, input: Any, output: Any, params: Any, log: Iterable[Any], config: Any
    ) -> JobSpec:
        """A job from its rule's declared parts (mappings or Snakemake's Namedlists) and
        the run's config."""
        own = dict(params.items())
        return cls(
            rule,
            _files(input),
            _files(output),
            own,
            [str(f) for f in log],
            run_settings(config, own),
        )

    def output_files(self) -> list[str]:
        """Every file the job writes, its named outputs' paths in order."""
        out: list[str] = []
        for value in self.output.values():
            out += [value] if isinstance(value, str) else list(value)
        return out

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> JobSpec:
        if not isinstance(data, dict) or set(data) != {f.name for f in fields(cls)}:
            raise ValueError("not a job spec")
        return cls(**data)
