"""What a run wrote, as its closing lines say it: where its results and reports are, and
which of its results are incomplete (failed tests: the run then fails too)."""

from __future__ import annotations

from kora.analysis.results import failure_summary
from kora.benchmarks.layout import RESULTS
from kora.run.workflow.pipeline import Pipeline


def _fresh(pipeline: Pipeline, path: str, since: float) -> bool:
    try:
        return (pipeline.workdir / path).stat().st_mtime >= since
    except FileNotFoundError:
        return False


def written_summary(pipeline: Pipeline, since: float) -> list[str]:
    """Where this run's results and reports are (files written since `since`)."""
    lines = []
    for target in pipeline.config.targets:
        results, report = pipeline.layout.results_json(target), pipeline.layout.report_html(target)
        if _fresh(pipeline, report, since):
            lines.append(f"{target}: {results}; report {report} (open it in a browser)")
        elif _fresh(pipeline, results, since):
            lines.append(f"{target}: {results}; for its report: {pipeline.command(report)}")
    if _fresh(pipeline, pipeline.layout.leaderboard_html(), since):
        lines.append(f"all targets: {pipeline.layout.leaderboard_html()}")
    return lines


def incomplete_results(pipeline: Pipeline, since: float) -> list[str]:
    """Failure summaries of the results files this run wrote."""
    return [
        summary
        for f in pipeline.results_files()
        if _fresh(pipeline, f, since) and (summary := failure_summary(pipeline.workdir / f))
    ]


def nothing_to_report(pipeline: Pipeline) -> str | None:
    """Why `snakemake --report` would pack none of the run's results (none of this
    config's is there: the report was asked without the run's --configfile), else None."""
    if any((pipeline.workdir / f).exists() for f in pipeline.results_files()):
        return None
    wanted = ", ".join(pipeline.results_files()) or "no target"
    results = pipeline.workdir / pipeline.layout.results
    found = ", ".join(sorted(p.parent.name for p in results.glob(f"*/{RESULTS}")))
    other = f" (this folder has results of {found}, made with another config)" if found else ""
    return (
        f"--report: none of this config's results is here ({wanted}): give the run's "
        "--configfile, e.g. `snakemake --report report.zip --configfile config/demo.yaml`"
        f"{other}; nothing was packed, and a report made before is left as it was"
    )
