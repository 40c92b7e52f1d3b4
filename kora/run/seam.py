"""Every use of Snakemake's internals, in one place (the Snakefile's `workflow` object).

Snakemake has no public API for what the run's start needs: the --configfile overlays
given on the command line (to name the file and line of a config error before Snakemake
reads them), the jobs a run will execute (to check only the keys and services they call,
to hand the broker the shard jobs to work ahead of, and to count the calls for the
progress line), whether jobs run on this machine (the broker only serves local jobs), and
whether rules run in their own software environments (`--use-conda`: then jobs must make
their calls in that environment, not in the broker's). Each reader checks what it reads
and says which Snakemake changed it; tests/test_seam.py runs each against the installed
Snakemake, and pyproject.toml pins the releases they passed on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class SnakemakeChanged(RuntimeError):
    """The installed Snakemake no longer has an internal kora reads."""


def _get(obj: Any, path: str) -> Any:
    found = obj
    for name in path.split("."):
        if not hasattr(found, name):
            import snakemake

            raise SnakemakeChanged(
                f"Snakemake {getattr(snakemake, '__version__', '?')} has no `workflow.{path}`: "
                "install a release pyproject.toml allows (pip install -e .)"
            )
        found = getattr(found, name)
    return found


def overlays(workflow: Any) -> list[str]:
    """The --configfile files given on the command line (read before `configfile:`
    adds config.yaml to the same list)."""
    return [str(f) for f in _get(workflow, "configfiles")]


def jobs_to_run(workflow: Any) -> Iterator[Any]:
    """The jobs the run will execute (in `onstart`, once the DAG is built)."""
    needrun = _get(workflow, "dag.needrun_jobs")
    yield from needrun(exclude_finished=False)


def job_parts(job: Any) -> tuple[str, dict[str, str], Any, Any, Any, Any]:
    """(rule name, wildcards, input, output, params, log) of a job."""
    return (
        str(_get(job, "rule.name")),
        dict(_get(job, "wildcards_dict")),
        _get(job, "input"),
        _get(job, "output"),
        _get(job, "params"),
        _get(job, "log"),
    )


def runs_locally(workflow: Any) -> bool:
    """Whether jobs run on this machine (false under a cluster executor)."""
    return bool(_get(workflow, "local_exec"))


def isolated_software(workflow: Any) -> bool:
    """Whether rules run in software environments of their own (--use-conda or a
    container): their jobs must then make their calls themselves, in that environment."""
    methods = _get(workflow, "deployment_settings.deployment_method")
    return bool(methods)
