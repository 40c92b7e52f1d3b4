"""A file asked of the run that no rule of its can make: one under a target the config
lacks, under another benchmark version's folder, or one no rule makes under a target's. Snakemake alone would say it has no
rule for it; rules/common.smk has each file named on the command line read here first
(kora.run.workflow.snakemake_api.check_targets), and such a request ends the command, naming what is wrong."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from kora import benchmarks
from kora.config.checks import unknown_target
from kora.run.workflow.pipeline import Pipeline


def unknown_request(
    pipeline: Pipeline, paths: Sequence[str], made: Callable[[str], bool] = lambda path: True
) -> str | None:
    """What is wrong with target files asked of this run, when one names a target the
    config lacks or another version's folder, or a file no rule makes (`made`: whether
    one does), else None: Snakemake alone would only say it has no rule for it."""
    for path in paths:
        # as Snakemake reads a target: relative to the workspace
        parts = Path(os.path.relpath(path, pipeline.workdir) if os.path.isabs(path) else path).parts
        defined, layout = list(pipeline.config.targets), pipeline.layout
        if len(parts) == 1 and not made(path) and path in defined:
            return (
                f"{path}: a target's name; ask Snakemake for its files, e.g. its report: "
                f"{pipeline.command(layout.report_html(path))}"
            )
        if len(parts) < 2:
            continue
        root, target = parts[0], parts[1]
        others = (benchmarks.get(n) for n in benchmarks.VERSIONS)
        other = next(
            (b for b in others if b is not pipeline.benchmark and b.results_dir == root), None
        )
        if other is not None:
            return (
                f"{path}: {root}/ holds {other.describe()} results, but this run's "
                f"config is {pipeline.benchmark.describe()}; add `--configfile` with "
                f"`benchmark: {other.name}`, or ask for {layout.results}/..."
            )
        if root != layout.results or target.startswith("leaderboard"):
            continue
        if target not in defined and (Path(path).suffix or len(parts) > 2):
            return f"{path}: {unknown_target(target, defined)}"
        if target in defined and not made(path):
            made_here = (
                layout.results_json,
                layout.report_html,
                layout.summary_json,
                layout.manifest_json,
                layout.usage_json,
                layout.conversations_parquet,
            )
            names = [Path(f(target)).name for f in made_here]
            near = difflib.get_close_matches(Path(path).name, names, n=1)
            guess = f" (did you mean {near[0]}?)" if near else ""
            return f"{path}: no rule makes it{guess}; a target's files: {', '.join(names)}"
    return None
