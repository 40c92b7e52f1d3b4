"""What the Snakefile asks of the package: the run's config, its shards, and each rule's
inputs and params.

Kept here (not in the .smk files) so it is typed, tested and shared with the `kora` CLI.
A rule's params are the only place its jobs take result-changing settings from
(kora.run.broker.execute); what only carries calls comes from the config by model name (kora.run.jobs.context).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from kora import benchmarks
from kora.benchmarks.base import Benchmark
from kora.benchmarks.layout import PLACE, Layout
from kora.benchmarks.outcomes import Conversation
from kora.benchmarks.schemas import AGE_RANGES
from kora.benchmarks.seedplan import SeedOrder
from kora.benchmarks.taxonomy import Taxonomy
from kora.benchmarks.templates import template_path
from kora.config.files import load_run_config, shown_overlays, snakemake_command
from kora.config.schema import KoraConfig
from kora.errors import ConfigError
from kora.io import read_jsonl
from kora.run.stages.registry import STAGES
from kora.run.transport.jobspec import JobSpec
from kora.run.workflow import risk_jobs


@dataclass
class Pipeline:
    config: KoraConfig
    taxonomy: Taxonomy
    workdir: Path
    # the --configfile files as the user typed them: every command printed for the user
    # names them again, or it would run with another config
    overlays: tuple[str, ...] = ()

    @cached_property
    def benchmark(self) -> Benchmark:
        return benchmarks.get(self.config.benchmark)

    @cached_property
    def layout(self) -> Layout:
        return Layout.of(self.benchmark)

    @classmethod
    def load(
        cls,
        overlays: Sequence[Path | str] = (),
        workdir: Path | str = ".",
        *,
        values: dict[str, object] | None = None,
        given: dict[str, object] | None = None,
    ) -> Pipeline:
        """config.yaml with `overlays` (and `given`) merged over it (see kora.config.files)."""
        config, taxonomy = load_run_config(overlays, workdir=workdir, values=values, given=given)
        return cls(config, taxonomy, Path(workdir), tuple(shown_overlays(overlays)))

    def _configfiles(self) -> str:
        return f" --configfile {shlex.join(self.overlays)}" if self.overlays else ""

    def command(self, *targets: str) -> str:
        """The Snakemake command that makes `targets` with this run's config files."""
        return snakemake_command(targets, self.overlays)

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
        return (self.workdir / self.layout.import_manifest).exists()

    def scenario_source(self) -> str:
        """'generated', or the imported file's SHA-256 (from the import manifest)."""
        try:
            manifest = orjson.loads((self.workdir / self.layout.import_manifest).read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return "generated"
        return f"imported {manifest.get('sha256', '')}"

    def target_imported(self, target: str) -> bool:
        return self.config.targets[target].imported

    def target_continued(self, target: str) -> bool:
        """Whether a target carries on recorded conversations (`kora continue`)."""
        return self.config.targets[target].continued

    def conversations_sources(self, wc: dict[str, str]) -> dict[str, str]:
        """What a conversations shard is made from: the cell's scenarios, or for a
        continued target its recorded conversations."""
        cell, target = self.cell_of(wc), wc["target"]
        if self.target_continued(target):
            if not (self.workdir / self.layout.recorded_manifest(target)).exists():
                raise ConfigError(
                    f"targets.{target}.continued: no recordings under "
                    f"{self.layout.target_dir(target)}/recorded/; file them first with "
                    f"`kora continue FILE --target {target}{self._configfiles()}`"
                )
            return {"recorded": self.layout.recorded(target, cell)}
        return {"scenarios": self.layout.scenarios(cell)}

    # --- the shard rules, from their stages' descriptions (kora.run.stages) -------------

    @staticmethod
    def cell_of(wc: Mapping[str, str]) -> str:
        return f"{wc['risk']}/{wc['age']}/{wc['motivation']}"

    @cached_property
    def cell_parts(self) -> list[tuple[str, str]]:
        """(age range, motivation) of each cell of a risk, in cell order: the grid is the
        same for every risk."""
        cells = self.cells()
        first = cells[0].split("/")[0] if cells else ""
        parts = (c.split("/") for c in cells)
        return [(age, motivation) for risk, age, motivation in parts if risk == first]

    # a shard rule's job holds one risk's cells (kora.run.workflow.risk_jobs)

    def rule_input(self, stage: str) -> Callable[[Any], dict[str, str | list[str]]]:
        return risk_jobs.inputs(self, stage, self.cell_parts)

    def rule_output(self, stage: str) -> str:  # the rule wraps it in `directory()`
        return risk_jobs.outputs(self, stage)

    def rule_params(self, stage: str) -> dict[str, object]:
        return risk_jobs.params(self, stage, self.cell_parts)

    def rule_log(self, stage: str) -> str:
        return risk_jobs.logs(self, stage)

    def job_spec(self, stage: str, wc: Mapping[str, str]) -> JobSpec:
        """The spec of one cell's job, as a rule's job hands it on (JobSpec.of, then
        kora.run.workflow.risk_jobs.split): what `kora plan` walks when no Snakemake run gives the
        jobs."""
        w = risk_jobs.Wildcards(**wc)
        # the retry token is left out: evaluating it may renew a damaged shard's token,
        # which is Snakemake's business, not a plan's
        params = {
            k: ("" if k == "retry" else v(w) if callable(v) else v)
            for k, v in STAGES[stage].params(self).items()
        }
        return JobSpec.of(
            stage,
            STAGES[stage].inputs(self, dict(wc)),
            {k: v.format(**wc) for k, v in STAGES[stage].outputs(self).items()},
            orjson.loads(orjson.dumps(params)),
            [STAGES[stage].log(self).format(**wc)],
            self.raw_config,
        )

    @cached_property
    def raw_config(self) -> dict[str, object]:
        """The config as Snakemake holds it (what a job's transport settings come from)."""
        return self.config.model_dump(mode="json", exclude_none=True)

    def recordings(self, target: str, cell: str) -> list[Conversation]:
        """A continued target's recordings of a cell that it runs (its prompt variants)."""
        prompts = self.config.target_prompts(target)
        path = self.workdir / self.layout.recorded(target, cell)
        return [r for r in read_jsonl(path, Conversation) if r.prompt in prompts]

    def conversation_source(self, target: str) -> str:
        """The scenario set a target's conversations come from (`scenario_source`), or for
        a continued target the recording's SHA-256: a new recording re-runs them."""
        if not self.target_continued(target):
            return self.scenario_source()
        try:
            manifest = orjson.loads(
                (self.workdir / self.layout.recorded_manifest(target)).read_bytes()
            )
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
        return list(self._templates[stage])

    @cached_property
    def _templates(self) -> dict[str, list[str]]:
        # every cell of every job declares them: resolved once (each resolve is a few
        # system calls, and they were a sixth of the whole grid's plan)
        directory = self.config.prompts_folder(self.workdir)
        workdir = self.workdir.resolve()
        out: dict[str, list[str]] = {}
        for stage, stems in self.benchmark.stage_templates.items():
            out[stage] = []
            for stem in stems:
                path = template_path(stem, directory).resolve()
                inside = path.is_relative_to(workdir)
                out[stage].append(str(path.relative_to(workdir) if inside else path))
        return out

    def taxonomy_files(self) -> list[str]:
        return list(self._taxonomy_files)

    @cached_property
    def _taxonomy_files(self) -> list[str]:
        inside = self.workdir.resolve()
        out = []
        for p in self.benchmark.taxonomy_paths(self.workdir / self.config.taxonomy_folder):
            real = p.resolve()
            out.append(str(real.relative_to(inside)) if real.is_relative_to(inside) else str(p))
        return out

    @cached_property
    def places(self) -> list[str]:
        """Each cell's "<age>/<motivation>" in its risk's folders (the `places` param)."""
        return [PLACE.format(age=age, motivation=motivation) for age, motivation in self.cell_parts]

    # --- rule params ------------------------------------------------------------------

    @cached_property
    def seed_plan(self) -> dict[str, list[SeedOrder]] | None:
        """Each cell's planned seed calls, when the version plans them (KORA v2's
        `total_seeds`); None: one call a cell."""
        c = self.config
        cells = (c.risks(self.taxonomy), list(c.age_ranges()), c.motivations(self.taxonomy))
        try:
            return self.benchmark.seed_plan(self.taxonomy, cells, c.grid, self.workdir)
        except ValueError as exc:
            raise ConfigError(f"config: {exc}") from None

    def seeds_plan_params(self) -> dict[str, object]:
        """The seeds rule's params of a planned run (none otherwise, so that the params of
        a run without a plan stay what they were)."""
        plan = self.seed_plan
        if plan is None:
            return {}

        def orders(wc: risk_jobs.Wildcards) -> list[dict[str, object]]:
            cell = f"{wc.risk}/{wc.age}/{wc.motivation}"
            return [o.model_dump(mode="json", exclude_none=True) for o in plan.get(cell, [])]

        return {"orders": orders}

    # --- outputs ------------------------------------------------------------------------

    def results_files(self) -> list[str]:
        return [self.layout.results_json(t) for t in self.config.targets]

    def report_files(self) -> list[str]:
        reports = [self.layout.report_html(t) for t in self.config.targets]
        return [*reports, self.layout.leaderboard_html()] if reports else []


def _alt(values: list[str]) -> str:
    return "|".join(re.escape(v) for v in values) or "(?!)"
