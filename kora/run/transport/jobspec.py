"""What a job is, as it travels: its rule and exactly that rule's declared files, params
and log, with the run-wide settings its calls need (`JobSpec`).

One builder (`JobSpec.of`) makes it from what Snakemake hands a rule's script, from the
jobs the run's start lists (for the broker's calls ahead and the progress line's count),
and from `kora plan`'s walk of the jobs a run would make. The standard library only: a
job's script imports this, and its start must stay cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from kora.benchmarks.layout import CACHE_DIR, CONCURRENCY


def run_settings(config: Any) -> dict[str, Any]:
    """The run-wide settings of a job: the models' settings in the config, by name (a
    job's client takes what carries its calls from them, what changes its answers from
    its params: kora.llm.settings.config.ModelConfig.of_job), the call store, the concurrency and
    the budget."""
    return {
        "models": config.get("models") or {},
        "cache_dir": str(config.get("cache_dir", CACHE_DIR)),
        "concurrency": int(config.get("concurrency", CONCURRENCY)),
        # a cap on the bill (kora.llm.money.budget): it never changes an answer; its `since`, a
        # date when YAML gave one, as JSON writes it
        "budget": _plain(config.get("budget")) or None,
    }


def _plain(value: object) -> object:
    """A config value as JSON holds it (a YAML date as its ISO text)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.isoformat() if hasattr(value, "isoformat") else value


def _files(named: Mapping[str, str | Iterable[object]]) -> dict[str, str | list[str]]:
    """A rule's named files (Snakemake's Namedlist, or a mapping) as {name: path or [paths]}."""
    return {
        name: str(value) if isinstance(value, str) else [str(v) for v in value]
        for name, value in named.items()
    }


@dataclass(frozen=True)
class JobSpec:
    rule: str
    input: Mapping[str, str | list[str]]  # a named input: a path, or a list of paths
    output: Mapping[str, str | list[str]]
    params: dict[str, Any]
    log: list[str]
    settings: dict[str, Any]

    @classmethod
    def of(
        cls, rule: str, input: Any, output: Any, params: Any, log: Iterable[object], config: Any
    ) -> JobSpec:
        """A job from its rule's declared parts (mappings or Snakemake's Namedlists) and
        the run's config."""
        return cls(
            rule,
            _files(input),
            _files(output),
            dict(params.items()),
            [str(f) for f in log],
            run_settings(config),
        )

    def output_files(self) -> list[str]:
        """Every file the job writes, its named outputs' paths in order."""
        out: list[str] = []
        for value in self.output.values():
            out += [value] if isinstance(value, str) else list(value)
        return out

    def as_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> JobSpec:
        if not isinstance(data, dict) or set(data) != {f.name for f in fields(cls)}:
            raise ValueError("not a job spec")
        return cls(**data)
