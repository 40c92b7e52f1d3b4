"""What the Snakefile asks of the package: validated config, shard lists, file names.

Kept here (not in the .smk files) so it is typed, tested and shared with the `kora` CLI.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kora.config import KoraConfig
from kora.config_files import load_run_config
from kora.shards import rejected_of, status_of
from kora.taxonomy import Shard, Taxonomy
from kora.templates import template_path

IMPORT_MANIFEST = Path("data/scenarios/IMPORTED.json")


def conversations_manifest(target: str) -> Path:
    return Path(f"results/{target}/conversations/IMPORTED.json")


# the templates each stage renders: a rule's inputs, so an edit re-runs exactly its users
STAGE_TEMPLATES = {
    "seeds": ("seeds",),
    "scenarios": ("scenario", "validate", "first_user_message"),
    "conversations": ("target_system", "next_user_message"),
    "judgments": ("judge_safety", "judge_behavior"),
}


def seeds_path(shard: Shard) -> str:
    return f"data/seeds/{shard.path}.jsonl"


def scenarios_path(shard: Shard) -> str:
    return f"data/scenarios/{shard.path}.jsonl"


def conversations_path(target: str, shard: Shard) -> str:
    return f"results/{target}/conversations/{shard.path}.jsonl"


def judgments_path(target: str, shard: Shard) -> str:
    return f"results/{target}/judgments/{shard.path}.jsonl"


def _custom_openai_url(base_url: str | None) -> bool:
    import os

    url = base_url or os.environ.get("OPENAI_BASE_URL") or ""
    return bool(url) and "api.openai.com" not in url


@dataclass
class Plan:
    config: KoraConfig
    taxonomy: Taxonomy
    workdir: Path

    @classmethod
    def load(
        cls,
        overlays: Sequence[Path | str] = (),
        workdir: Path | str = ".",
        *,
        values: dict[str, Any] | None = None,
    ) -> Plan:
        """config.yaml with `overlays` merged over it (see kora.config_files)."""
        config, taxonomy = load_run_config(overlays, workdir=workdir, values=values)
        return cls(config, taxonomy, Path(workdir))

    def shards(self) -> list[Shard]:
        c = self.config
        return self.taxonomy.shards(
            c.risks(self.taxonomy), c.age_ranges(), c.motivations(self.taxonomy)
        )

    @property
    def imported(self) -> bool:
        return (self.workdir / IMPORT_MANIFEST).exists()

    def scenario_source(self) -> str:
        """'generated', or the imported file's SHA-256 (from the import manifest)."""
        import orjson

        try:
            manifest = orjson.loads((self.workdir / IMPORT_MANIFEST).read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return "generated"
        return f"imported {manifest.get('sha256', '')}"

    def target_imported(self, target: str) -> bool:
        return self.config.targets[target].imported

    def templates(self, stage: str) -> list[str]:
        """A stage's template files, as rule inputs: relative to the project when inside
        it, so a moved checkout re-runs nothing."""
        d = self.config.prompts_dir
        directory = self.workdir / d if d is not None else None
        out = []
        for stem in STAGE_TEMPLATES[stage]:
            path = template_path(stem, directory).resolve()
            inside = path.is_relative_to(self.workdir.resolve())
            out.append(str(path.relative_to(self.workdir.resolve()) if inside else path))
        return out

    def taxonomy_files(self) -> list[str]:
        d = Path(self.config.taxonomy_dir)
        return [str(d / "risks.json"), str(d / "motivations.json")]

    def model_params(self, name: str) -> dict[str, Any]:
        return self.config.model_params(name)

    def target_params(self, target: str) -> dict[str, Any]:
        model = self.config.targets[target].model
        return {"imported": True} if model is None else self.model_params(model)

    def models_used(self, target: str) -> dict[str, dict[str, Any]]:
        from kora.results import models_used

        return models_used(self.config, target)

    def written_summary(self, since: float) -> list[str]:
        """Where this run's results and reports are (files written since `since`)."""

        def fresh(path: str) -> bool:
            try:
                return (self.workdir / path).stat().st_mtime >= since
            except FileNotFoundError:
                return False

        lines = []
        for target in self.config.targets:
            results, report = f"results/{target}/results.json", f"results/{target}/report.html"
            if fresh(report):
                lines.append(f"{target}: {results}; report {report} (open it in a browser)")
            elif fresh(results):
                lines.append(f"{target}: {results}; for its report: snakemake --cores 2 {report}")
        if fresh("results/leaderboard.html"):
            lines.append("all targets: results/leaderboard.html")
        return lines

    def incomplete_results(self, since: float) -> list[str]:
        """Failure summaries of the results files this run wrote (mtime >= since)."""
        from kora.results import failure_summary

        out = []
        for f in self.results_files():
            path = self.workdir / f
            try:
                if path.stat().st_mtime < since:
                    continue
            except FileNotFoundError:
                continue
            summary = failure_summary(path)
            if summary:
                out.append(summary)
        return out

    def results_files(self) -> list[str]:
        return [f"results/{t}/results.json" for t in self.config.targets]

    def report_files(self) -> list[str]:
        reports = [f"results/{t}/report.html" for t in self.config.targets]
        return [*reports, "results/leaderboard.html"] if reports else []

    def nominal_calls(self, jobs: list[tuple[str, dict[str, str]]]) -> int:
        """The calls these (rule, wildcards) jobs make at their nominal count: the total
        of the progress line (calls answered from the store count as calls)."""
        c = self.config

        def lines(path: str, default: int) -> int:
            try:
                return (self.workdir / path).read_bytes().count(b"\n")
            except FileNotFoundError:
                return default

        total = 0
        for rule, wc in jobs:
            if rule not in ("seeds", "scenarios", "conversations", "judgments"):
                continue
            cell = f"{wc['risk']}/{wc['age']}/{wc['motivation']}"
            if rule == "seeds":
                total += 1
                continue
            seeds = lines(f"data/seeds/{cell}.jsonl", c.grid.seeds_per_task)
            if rule == "scenarios":
                total += 3 * seeds
                continue
            tests = lines(f"data/scenarios/{cell}.jsonl", seeds) * len(
                c.target_prompts(wc["target"])
            )
            total += 5 * tests if rule == "conversations" else 2 * len(c.judges) * tests
        return total

    def results_inputs(self, target: str) -> dict[str, list[str]]:
        """Every shard file behind a target's results, by kind.

        All of them are inputs of its results job, so a shard that a failed or killed job
        left missing is rebuilt by the next run of the same command, whatever stage it
        belongs to (Snakemake would otherwise keep a missing intermediate while the files
        after it exist).
        """
        shards = self.shards()
        out: dict[str, list[str]] = {}
        for stage, path_of in (
            ("judgments", lambda s: judgments_path(target, s)),
            ("conversations", lambda s: conversations_path(target, s)),
            ("scenarios", scenarios_path),
            ("seeds", seeds_path),
        ):
            if stage in ("scenarios", "seeds") and self.target_imported(target):
                continue
            if stage == "seeds" and self.imported:
                continue
            data = [path_of(s) for s in shards]
            out[stage] = data
            out[f"{stage}_status"] = [status_of(p) for p in data]
            if stage == "scenarios":
                out["rejected"] = [rejected_of(p) for p in data]
        return out

    def results_input_files(self, target: str) -> list[str]:
        return [f for files in self.results_inputs(target).values() for f in files]

    def models_for_jobs(self, jobs: list[tuple[str, dict[str, str]]]) -> set[str]:
        """The models that jobs of these (rule, wildcards) will call."""
        c = self.config
        names: set[str] = set()
        for rule, wc in jobs:
            if rule == "seeds":
                names.add(c.seed_model)
            elif rule == "scenarios":
                names |= {c.expand_model, c.user_model}
            elif rule == "conversations":
                model = c.targets[wc["target"]].model if wc.get("target") in c.targets else None
                names |= {c.user_model} | ({model} if model else set())
            elif rule == "judgments":
                names |= set(c.judges)
        return names

    def missing_keys(self, names: set[str] | None = None) -> list[str]:
        """API-key variables that these models (default: every model of the run) need
        and the environment lacks."""
        import os

        c = self.config
        if names is None:
            names = {c.seed_model, c.expand_model, c.user_model, *c.judges}
            names |= {t.model for t in c.targets.values() if t.model is not None}
        missing = []
        for name in sorted(names):
            m = c.models[name]
            if m.provider == "anthropic":
                env = m.api_key_env or "ANTHROPIC_API_KEY"
            elif m.provider == "openai" and (m.api_key_env or not _custom_openai_url(m.base_url)):
                # a local OpenAI-compatible server (vLLM, Ollama) may need no key
                env = m.api_key_env or "OPENAI_API_KEY"
            elif m.provider == "chat-endpoint" and m.api_key_env:
                env = m.api_key_env
            else:
                continue
            if not os.environ.get(env):
                missing.append(f"{env} (model {name!r})")
        return missing

    def unreachable(self, names: set[str]) -> list[str]:
        """Models among `names` whose own service (a configured or environment base URL)
        cannot be reached at all: a wrong URL or a service that is not running would
        otherwise fail every call of the run after minutes of retries."""
        import os

        from kora.llm.http import probe

        if any(
            os.environ.get(v)
            for v in (
                "HTTPS_PROXY",
                "https_proxy",
                "HTTP_PROXY",
                "http_proxy",
                "ALL_PROXY",
                "all_proxy",
            )
        ):
            return []  # the proxy knows the way; a direct probe would mislead
        env_url = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
        out = []
        for name in sorted(names):
            m = self.config.models[name]
            url = m.base_url or os.environ.get(env_url.get(m.provider, ""), "")
            if m.provider == "mock" or not url:
                continue
            why = probe(url)
            if why is not None:
                out.append(
                    f"model {name!r}: cannot connect to {url} ({why}): is the service "
                    "running, and is base_url right?"
                )
        return out

    def wildcard_constraints(self) -> dict[str, str]:
        def alt(values: list[str]) -> str:
            return "|".join(re.escape(v) for v in values) or "(?!)"

        return {
            "risk": alt(list(self.taxonomy.risks)),
            "age": alt(["7to9", "10to12", "13to17"]),
            "motivation": alt([m.id for m in self.taxonomy.motivations]),
            "target": alt(list(self.config.targets)),
        }
