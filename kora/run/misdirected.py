"""A file asked of the run that no rule of its can make: one under a target the config
lacks, or under another benchmark version's folder. Snakemake alone would say it has no
rule for it; rules/requests.smk's rules catch such a request and stop the run before any
job, naming what is wrong."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from kora import benchmarks
from kora.run.pipeline import Pipeline


def unknown_targets(pipeline: Pipeline) -> str:
    """Wildcard pattern of a folder name under the results folder that is no target
    of the config (a file asked there gets a message naming the targets)."""
    known = "|".join(re.escape(t) for t in pipeline.config.targets)
    # the look-ahead ends at the slash after the name: a known target's path never matches
    return f"(?!(?:{known})/)[^/]+" if known else "[^/]+"


def other_results_dirs(pipeline: Pipeline) -> list[str]:
    """The results folders of the other benchmark benchmarks."""
    others = (benchmarks.get(n) for n in benchmarks.VERSIONS)
    return [b.results_dir for b in others if b is not pipeline.benchmark]


def unknown_request(pipeline: Pipeline, paths: Sequence[str]) -> str | None:
    """What is wrong with target files asked of this run, when one names a target the
    config lacks or another version's folder (Snakemake alone would only say it has no
    rule for it), else None."""
    for path in paths:
        parts = Path(path).parts
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
