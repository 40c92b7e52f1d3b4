"""What the Snakefile asks of the package: the run's config, its shards, and each rule's
inputs and params.

Kept here (not in the .smk files) so it is typed, tested and shared with the `kora` CLI.
A rule's params are the only place its jobs take result-changing settings from
(kora.run.entries); what only carries calls comes from the config by model name (kora.run.context).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from kora.analysis.results import ResultsMeta, failure_summary
from kora.benchmarks.schemas import AGE_RANGES, Conversation
from kora.benchmarks.taxonomy import Taxonomy, taxonomy_paths
from kora.benchmarks.templates import template_path
from kora.benchmarks.v2.plan import SeedOrder, load_distribution, plan_cells
from kora.config.files import load_run_config
from kora.config.schema import KoraConfig
from kora.errors import ConfigError, KoraError
from kora.io import read_jsonl
from kora.run.shards import (
    IMPORT_MANIFEST,
    conversations_path,
    judgments_path,
    recorded_manifest,
    recorded_path,
    rejected_of,
    scenarios_path,
    seeds_path,
    status_of,
)
from kora.run.stages.converse import conversation_calls, turn_calls

# the templates each stage renders: a rule's inputs, so an edit re-runs exactly its users
STAGE_TEMPLATES = {
    "seeds": ("seeds",),
    "scenarios": ("scenario", "validate", "first_user_message"),
    "conversations": ("target_system", "next_user_message"),
    "judgments": ("judge_safety", "judge_behavior"),
}
# KORA v2 judges mechanisms instead of behaviours
V2_JUDGE_TEMPLATES = ("judge_safety", "judge_mechanisms")
# calls an item makes at its nominal count (one seed call a shard; generate, validate and
# the first child message a scenario; 3 target replies and 2 child messages a test; a
# safety and a behaviour judgment per judge): the progress line's and `kora plan`'s total
NOMINAL_CALLS = {"seeds": 1, "scenarios": 3, "conversations": 5, "judgments": 2}


@dataclass
class Pipeline:
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
    ) -> Pipeline:
        """config.yaml with `overlays` merged over it (see kora.config.files)."""
        config, taxonomy = load_run_config(overlays, workdir=workdir, values=values)
        return cls(config, taxonomy, Path(workdir))

    # --- the grid ---------------------------------------------------------------------

    def cells(self) -> list[str]:
        """Every grid cell of the run, "<risk>/<age>/<motivation>", in taxonomy order."""
        c = self.config
        shards = self.taxonomy.shards(
            c.risks(self.taxonomy), c.age_ranges(), c.motivations(self.taxonomy)
        )
        return [s.path for s in shards]

    @property
    def imported(self) -> bool:
        """Whether the scenarios are an import (source files no rule makes)."""
        return (self.workdir / IMPORT_MANIFEST).exists()

    def scenario_source(self) -> str:
        """'generated', or the imported file's SHA-256 (from the import manifest)."""
        try:
            manifest = orjson.loads((self.workdir / IMPORT_MANIFEST).read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return "generated"
        return f"imported {manifest.get('sha256', '')}"

    def target_imported(self, target: str) -> bool:
        return self.config.targets[target].imported

    def target_continued(self, target: str) -> bool:
        """Whether a target carries on recorded conversations (`kora continue`)."""
        return self.config.targets[target].continued

    def conversations_sources(self, wc: Any) -> dict[str, str]:
        """What a conversations shard is made from: the cell's scenarios, or for a
        continued target its recorded conversations."""
        cell = f"{wc.risk}/{wc.age}/{wc.motivation}"
        if self.target_continued(wc.target):
            if not (self.workdir / recorded_manifest(wc.target)).exists():
                raise ConfigError(
                    f"targets.{wc.target}.continued: no recordings under "
                    f"results/{wc.target}/recorded/; file them first with "
                    f"`kora continue FILE --target {wc.target}`"
                )
            return {"recorded": recorded_path(wc.target, cell)}
        return {"scenarios": scenarios_path(cell)}

    def recordings(self, target: str, cell: str) -> list[Conversation]:
        """A continued target's recordings of a cell that it runs (its prompt variants)."""
        prompts = self.config.target_prompts(target)
        path = self.workdir / recorded_path(target, cell)
        return [r for r in read_jsonl(path, Conversation) if r.prompt in prompts]

    def conversation_source(self, target: str) -> str:
        """The scenario set a target's conversations come from (`scenario_source`), or for
        a continued target the recording's SHA-256: a new recording re-runs them."""
        if not self.target_continued(target):
            return self.scenario_source()
        try:
            manifest = orjson.loads((self.workdir / recorded_manifest(target)).read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return "recorded"
        return f"recorded {manifest.get('sha256', '')}"

    def wildcard_constraints(self) -> dict[str, str]:
        return {
            "risk": _alt(list(self.taxonomy.risks)),
            "age": _alt(list(AGE_RANGES)),
            "motivation": _alt([m.id for m in self.taxonomy.motivations]),
            "target": _alt(list(self.config.targets)),
        }

    def called_targets(self) -> str:
        """Wildcard pattern of the targets whose conversations a rule makes (not imports)."""
        return _alt([t for t in self.config.targets if not self.target_imported(t)])

    # --- rule inputs ------------------------------------------------------------------

    def templates(self, stage: str) -> list[str]:
        """A stage's template files, as rule inputs: relative to the project when inside
        it, so a moved checkout re-runs nothing."""
        d = self.config.prompts_dir
        directory = self.workdir / d if d is not None else None
        out = []
        stems = STAGE_TEMPLATES[stage]
        if stage == "judgments" and self.config.benchmark == "v2":
            stems = V2_JUDGE_TEMPLATES
        for stem in stems:
            path = template_path(stem, directory).resolve()
            inside = path.is_relative_to(self.workdir.resolve())
            out.append(str(path.relative_to(self.workdir.resolve()) if inside else path))
        return out

    def taxonomy_files(self) -> list[str]:
        inside = self.workdir.resolve()
        return [
            str(p.resolve().relative_to(inside)) if p.resolve().is_relative_to(inside) else str(p)
            for p in taxonomy_paths(self.workdir / self.config.taxonomy_folder)
        ]

    def agreement_files(self, target: str) -> list[str]:
        path = self.workdir / "results" / target / "agreement.json"
        return [f"results/{target}/agreement.json"] if path.exists() else []

    def judgment_files(self, target: str) -> list[str]:
        return [judgments_path(target, c) for c in self.cells()]

    def results_inputs(self, target: str) -> dict[str, list[str]]:
        """Every shard file behind a target's results, by kind, and the taxonomy.

        All of them are inputs of its results job, so a shard that a failed or killed job
        left missing is rebuilt by the next run of the same command, whatever stage it
        belongs to (Snakemake would otherwise keep a missing intermediate while the files
        after it exist).
        """
        cells = self.cells()
        out: dict[str, list[str]] = {}
        for stage, path_of in (
            ("judgments", lambda c: judgments_path(target, c)),
            ("conversations", lambda c: conversations_path(target, c)),
            ("scenarios", scenarios_path),
            ("seeds", seeds_path),
        ):
            if stage in ("scenarios", "seeds") and (
                self.target_imported(target) or self.target_continued(target)
            ):
                continue
            if stage == "seeds" and self.imported:
                continue
            data = [path_of(c) for c in cells]
            out[stage] = data
            out[f"{stage}_status"] = [status_of(p) for p in data]
            if stage == "scenarios":
                out["rejected"] = [rejected_of(p) for p in data]
        out["taxonomy"] = self.taxonomy_files()
        return out

    def results_input_files(self, target: str) -> list[str]:
        return [f for files in self.results_inputs(target).values() for f in files]

    # --- rule params ------------------------------------------------------------------

    @cached_property
    def seed_plan(self) -> dict[str, list[SeedOrder]] | None:
        """KORA v2 with `total_seeds`: each cell's planned seed calls (kora.benchmarks.v2.plan)."""
        c = self.config
        if c.benchmark != "v2" or c.grid.total_seeds is None:
            return None
        distribution = (
            None
            if c.grid.distribution is None
            else load_distribution(c.grid.distribution, self.workdir)
        )
        try:
            return plan_cells(
                self.taxonomy,
                c.risks(self.taxonomy),
                c.age_ranges(),
                c.motivations(self.taxonomy),
                seeds_per_task=c.grid.seeds_per_task,
                total_seeds=c.grid.total_seeds,
                distribution=distribution,
                random_seed=c.grid.random_seed,
            )
        except ValueError as exc:
            raise ConfigError(f"config: {exc}") from None

    def seeds_plan_params(self) -> dict[str, Any]:
        """The seeds rule's params of a planned v2 run (none otherwise, so that a v1 run's
        params stay what they were)."""
        plan = self.seed_plan
        if plan is None:
            return {}

        def orders(wc: Any) -> list[dict[str, Any]]:
            cell = f"{wc.risk}/{wc.age}/{wc.motivation}"
            return [o.model_dump(mode="json", exclude_none=True) for o in plan.get(cell, [])]

        return {"orders": orders}

    def planned_seeds(self, cell: str) -> int:
        """Seeds a cell is asked for: its plan's, or seeds_per_task."""
        plan = self.seed_plan
        if plan is None:
            return self.config.grid.seeds_per_task
        return sum(o.count for o in plan.get(cell, []))

    def model_params(self, name: str) -> dict[str, Any]:
        return self.config.model_params(name)

    def role_params(self, role: str) -> dict[str, Any] | list[dict[str, Any]]:
        """seed_model, expand_model or user_model as a rule param (a chain as a list)."""
        return self.config.role_params(getattr(self.config, role))

    def target_model_params(self, target: str) -> dict[str, Any]:
        model = self.config.targets[target].model
        assert model is not None, f"target {target!r} has imported conversations"
        return self.model_params(model)

    def judges_params(self) -> list[dict[str, Any]]:
        return [self.model_params(j) for j in self.config.judges]

    def results_meta(self, target: str) -> dict[str, Any]:
        meta = ResultsMeta.of(self.config, target).model_dump(mode="json")
        if not meta["continued"]:
            del meta["continued"]  # the params of every other target's results stay as they were
        return meta

    def leaderboard_judgments(self) -> dict[str, list[str]]:
        """Each target's judgment shards, for the paired comparisons."""
        return {t: self.judgment_files(t) for t in self.config.targets}

    # --- outputs ------------------------------------------------------------------------

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
            if rule not in NOMINAL_CALLS:
                continue
            cell = f"{wc['risk']}/{wc['age']}/{wc['motivation']}"
            if rule == "seeds":
                plan = self.seed_plan
                total += NOMINAL_CALLS["seeds"] * (1 if plan is None else len(plan.get(cell, [])))
                continue
            seeds = lines(seeds_path(cell), self.planned_seeds(cell))
            if rule == "scenarios":
                total += NOMINAL_CALLS["scenarios"] * seeds
                continue
            if c.targets[wc["target"]].continued:
                try:
                    recorded = self.recordings(wc["target"], cell)
                except (OSError, KoraError):
                    recorded = []
                if rule == "conversations":
                    total += sum(conversation_calls(self.taxonomy, r.scenario,
                                                    len(r.messages) // 2) for r in recorded)  # fmt: skip
                    continue
                tests = len(recorded)
            else:
                tests = lines(scenarios_path(cell), seeds) * len(c.target_prompts(wc["target"]))
            if rule == "conversations":
                # the cell's risk's length (v2: up to 8 turns), without a flavor's
                per_test = turn_calls(self.taxonomy.risks[wc["risk"]][1].turns())
            else:
                per_test = NOMINAL_CALLS[rule] * (len(c.judges) if rule == "judgments" else 1)
            total += per_test * tests
        return total

    def _fresh(self, path: str, since: float) -> bool:
        try:
            return (self.workdir / path).stat().st_mtime >= since
        except FileNotFoundError:
            return False

    def written_summary(self, since: float) -> list[str]:
        """Where this run's results and reports are (files written since `since`)."""
        lines = []
        for target in self.config.targets:
            results, report = f"results/{target}/results.json", f"results/{target}/report.html"
            if self._fresh(report, since):
                lines.append(f"{target}: {results}; report {report} (open it in a browser)")
            elif self._fresh(results, since):
                lines.append(f"{target}: {results}; for its report: snakemake --cores 2 {report}")
        if self._fresh("results/leaderboard.html", since):
            lines.append("all targets: results/leaderboard.html")
        return lines

    def incomplete_results(self, since: float) -> list[str]:
        """Failure summaries of the results files this run wrote."""
        return [
            summary
            for f in self.results_files()
            if self._fresh(f, since) and (summary := failure_summary(self.workdir / f))
        ]


def _alt(values: list[str]) -> str:
    return "|".join(re.escape(v) for v in values) or "(?!)"
