"""A file asked of the run that no rule of its can make: one under a target the config
lacks, or under another benchmark version's folder. Snakemake alone would say it has no
rule for it; rules/common.smk has each file named on the command line read here first
(kora.run.seam.check_targets), and such a request ends the command, naming what is wrong."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kora import benchmarks
from kora.run.pipeline import Pipeline


def unknown_request(pipeline: Pipeline, paths: Sequence[str]) -> str | None:
    """What is wrong with target files asked of this run, when one names a target the
    config lacks or another version's folder (Snakemake alone would only say it has no
    rule for it), else None."""
    for path in paths:
        # as Snakemake reads a target: relative to the workspace
        parts = Path(os.path.relpath(path, pipeline.workdir) if os.path.isabs(path) else path).parts
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
                f"`benchmark: {other.name}`, or ask for {pipeline.layout.results}/..."
            )
        if (
            root == pipeline.layout.results
            and target not in pipeline.config.targets
            and (Path(path).suffix or len(parts) > 2)
            and not target.startswith("leaderboard")
        ):
            defined = ", ".join(pipeline.config.targets) or "none"
            return (
                f"{path}: no target {target!r} in the config (targets: {defined}); "
                "add it under `targets:`, or give the --configfile that defines it"
            )
    return None
