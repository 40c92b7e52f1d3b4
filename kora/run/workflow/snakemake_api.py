"""Every use of Snakemake's internals, in one place (the Snakefile's `workflow` object).

Snakemake has no public API for what kora needs of it: what the command line gave (the
overlays, the --config values, the files asked, `--report`), the jobs a run will execute
and where they run, a say in how it ends or refuses a run (in kora's words, not in its
own with a traceback, or with an `--unlock` that must not be followed), and in how its
process works (what it imports, what its scheduler reads, how it starts a script job).
Each reader checks what it reads and says which Snakemake changed it; tests/test_snakemake_api.py
runs each against the installed Snakemake, and pyproject.toml pins the releases they
passed on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # Snakemake has no type hints: these name what is read, not checked
    from snakemake.iocontainers import InputFiles, Log, OutputFiles, Params
    from snakemake.jobs import Job
    from snakemake.scheduling.job_scheduler import JobScheduler
    from snakemake.script import PythonScript
    from snakemake.workflow import Workflow


class SnakemakeChanged(RuntimeError):
    """The installed Snakemake no longer has an internal kora reads."""


def _get(obj: object, path: str) -> Any:
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


def overlays(workflow: Workflow) -> list[str]:
    """The --configfile files given on the command line (read before `configfile:`
    adds config.yaml to the same list)."""
    return [str(f) for f in _get(workflow, "configfiles")]


def config_values(workflow: Workflow) -> dict[str, object]:
    """The `--config KEY=VALUE` values given on the command line, as Snakemake parsed them."""
    return dict(_get(workflow, "config_settings.config"))


def parse_config(entry: str) -> dict[str, object]:
    """One `--config` value read as Snakemake reads it (ValueError: one it refuses)."""
    from snakemake.cli import parse_config

    return dict(parse_config([entry]))


def stop(error: Exception) -> NoReturn:
    """End Snakemake here, as the Snakefile is read or in `onstart`, with `error` in kora's
    own words (`kora: error: ...`) and status 1: an exception raised there is printed in
    Snakemake's format, with a frame of the Snakefile (`rules/common.smk, line 27`).
    Snakemake lets SystemExit through, and lets go of its locks on the way."""
    from kora.llm.masking import terminal_safe

    print(terminal_safe(f"kora: error: {error}"), file=sys.stderr, flush=True)
    raise SystemExit(1)


def check_targets(
    workflow: Workflow, check: Callable[[list[str], Callable[[str], bool]], str | None]
) -> None:
    """Before Snakemake builds its jobs (a run, a dry run, a report: every command that
    reads the targets), `check` reads the files named on the command line, and may ask
    whether a rule makes one; what it says is wrong ends the command as an error of the
    command line: `Error: ...`, with no traceback (a rule's input function that raised
    would be printed with one, a file no rule makes Snakemake's MissingRuleException)."""
    from snakemake_interface_common.exceptions import ApiError

    build = _get(workflow, "_build_dag")

    def made(path: str) -> bool:
        return any(rule.is_producer(path) for rule in _get(workflow, "rules"))

    def checked() -> None:
        asked = _get(workflow, "dag_settings.targets")
        problem = check([t for t in asked if not workflow.is_rule(t)], made)
        if problem:
            raise ApiError(problem)
        build()

    workflow._build_dag = checked


def reporting(workflow: Workflow, refuse: Callable[[], str | None]) -> Callable[[], bool]:
    """Whether this Snakemake packs a report (`--report`), asked when its jobs are built:
    the Snakefile is read before Snakemake says what it will do. What `refuse()` says
    ends a report before it is packed (an error of the command line, `Error: ...`): the
    report file made before is left as it was."""
    from snakemake_interface_common.exceptions import ApiError

    pack = _get(workflow, "create_report")
    asked: list[bool] = []

    def packing(*args: object, **kwargs: object) -> object:
        asked.append(True)
        problem = refuse()
        if problem:
            raise ApiError(problem)
        return pack(*args, **kwargs)

    workflow.create_report = packing
    return lambda: bool(asked)


def jobs_to_run(workflow: Workflow) -> Iterator[Job]:
    """The jobs the run will execute (in `onstart`, once the DAG is built)."""
    needrun = _get(workflow, "dag.needrun_jobs")
    yield from needrun(exclude_finished=False)


def job_parts(job: Job) -> tuple[str, dict[str, str], InputFiles, OutputFiles, Params, Log]:
    """(rule name, wildcards, input, output, params, log) of a job."""
    return (
        str(_get(job, "rule.name")),
        dict(_get(job, "wildcards_dict")),
        _get(job, "input"),
        _get(job, "output"),
        _get(job, "params"),
        _get(job, "log"),
    )


def runs_locally(workflow: Workflow) -> bool:
    """Whether jobs run on this machine (false under a cluster executor)."""
    return bool(_get(workflow, "local_exec"))


def isolated_software(workflow: Workflow) -> bool:
    """Whether rules run in software environments of their own (--use-conda or a
    container): their jobs must then make their calls themselves, in that environment."""
    methods = _get(workflow, "deployment_settings.deployment_method")
    return bool(methods)


def stale_locks(workdir: Path, busy: Callable[[], object]) -> list[Path]:
    """The locks (`.snakemake/locks/`) a Snakemake killed outright left in `workdir`, when
    no Snakemake of the workspace is alive: none holds the call store's lock (`busy()`,
    kora.run.runlock) and none runs in the folder. Empty when the locks may be a live
    run's (where this system's processes cannot be listed, they may)."""
    locks = sorted((workdir / ".snakemake" / "locks").glob("*.lock"))
    if not locks or busy() or not Path("/proc").is_dir() or _snakemake_in(workdir):
        return []
    return locks


def refuse_a_second_run(workflow: Workflow, busy: Callable[[], str | None]) -> None:
    """A run asking for files another run has locked (`.snakemake/locks/`) ends in
    Snakemake's LockException, which advises `--unlock`, even while that run is alive.
    Then the live holder is named instead, as an error of the command line (`Error:
    ...`): the run holding the call store (`busy()`, kora.run.runlock), else a Snakemake
    running in the folder (a run still building its jobs). A lock no one alive holds is
    left to Snakemake's words; a killed run's is cleared as the Snakefile is read
    (`stale_locks`)."""
    from snakemake_interface_common.exceptions import ApiError

    prepare = _get(workflow, "_prepare_dag")

    def prepared(*args: object, **kwargs: object) -> object:
        done = prepare(*args, **kwargs)
        persistence = _get(workflow, "persistence")
        lock = _get(persistence, "lock")
        if getattr(lock, "__name__", "") != "lock":  # --nolock, a dry run: nothing locked
            return done

        def checked() -> object:
            if _get(persistence, "locked"):
                holder, pid = busy(), _snakemake_in(Path.cwd())
                if holder is None and pid is not None:
                    holder = (
                        f"another Snakemake (pid {pid}) is running in {Path.cwd()}: two "
                        "runs at once would make the same files. Wait for it to end, or stop it."
                    )
                if holder is not None:
                    raise ApiError(holder)
            return lock()

        persistence.lock = checked
        return done

    workflow._prepare_dag = prepared


def _snakemake_in(workdir: Path) -> int | None:
    """Another Snakemake process running in `workdir` on this machine, by its pid (Linux's
    /proc; None where it cannot be read)."""
    import os

    here = workdir.resolve()
    mine = {os.getpid(), os.getppid()}
    for entry in Path("/proc").glob("[0-9]*"):
        if int(entry.name) in mine:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = (entry / "cwd").resolve()
        except OSError:
            continue
        if cwd == here and _is_snakemake(argv):
            return int(entry.name)
    return None


def _is_snakemake(argv: list[bytes]) -> bool:
    """`snakemake ...`, `python .../bin/snakemake ...` or `python -m snakemake ...`: not a
    job's script under `.snakemake/scripts/`."""
    words = [w.decode(errors="replace") for w in argv[:3]]
    if words and Path(words[0]).name == "snakemake":
        return True
    if len(words) > 1 and Path(words[1]).name == "snakemake":
        return True
    return words[1:3] == ["-m", "snakemake"]


# a job's files shown when Snakemake reports it: a results or report job lists a folder
# per risk and stage, and a failed run listed every one of them for every job
SHOWN_FILES = 3


def tidy_job_reports(stopping: Callable[[], bool]) -> None:
    """Snakemake's reports of a job (its start, its failure) name a few of its files and
    count the rest; while the run is being stopped (`stopping()`), neither the failures of
    the jobs the stop ended nor the run's end on them are reported: its closing lines say."""
    import logging

    from snakemake.scheduling import job_scheduler
    from snakemake_interface_logger_plugins.common import LogEvent

    # (a Snakemake without it: the line is shown, tests/test_snakemake_api.py says so)
    failed = getattr(job_scheduler, "_ERROR_MSG_FINAL", None)

    class Tidy(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            event = getattr(record, "event", None)
            if (
                event == LogEvent.JOB_ERROR
                or (event == LogEvent.ERROR and getattr(record, "exception", "") == "RuleException")
                or record.msg == failed
            ) and stopping():
                return False
            if event in (LogEvent.JOB_INFO, LogEvent.JOB_ERROR):
                for name in ("input", "output", "log"):
                    files = getattr(record, name, None)
                    if isinstance(files, list) and len(files) > SHOWN_FILES:
                        more = f"(and {len(files) - SHOWN_FILES} more)"
                        setattr(record, name, [*files[:SHOWN_FILES], more])
            return True

    logging.getLogger("snakemake.logging").addFilter(Tidy())


# Snakemake's own process imports pandas (and with it pyarrow) only to ask whether a rule's
# params hold a DataFrame: when it writes a script job's preamble
# (snakemake.iocontainers.Snakemake._safely_store_params) and when it records a finished
# job's params (snakemake.persistence.PersistenceBase._serialize_param, which first asks
# importlib whether pandas is there). A kora rule's params are plain values, and the import
# holds 70 MB of that process for the whole run (bench/full_grid.py). pandas and polars are
# kora dependencies' dependencies that nothing in that process uses (the statistics that do
# run in the jobs' processes), so that process is told they are not installed. An executor
# plugin that imports pandas itself (the Slurm one does, when Snakemake collects its plugins
# before reading the Snakefile) leaves it loaded: nothing is saved then, and nothing breaks.
_DATAFRAMES = ("pandas", "polars")


def keep_dataframes_out() -> None:
    """Make pandas and polars look not installed in this process (Snakemake's): `import`
    raises ModuleNotFoundError and importlib.util.find_spec says None. A module already
    imported is left as it is."""
    for name in _DATAFRAMES:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


# Before it picks the next jobs, Snakemake's scheduler reads the size of every input of
# every job ready to run (JobScheduler.update_input_sizes), a task and two file lookups a
# file, after every job that ends. A kora shard job listed its cells' files then (it lists
# its risk's folders now, kora.run.workflow.risk_jobs), and in a whole grid dozens of jobs wait ready
# for a free core: the whole v1 grid's Snakemake process spent 70 of its 179 s of CPU
# there (py-spy, bench/full_grid.py), and that share grows with the square of the grid.
# The sizes serve two ends: the default scheduler (ilp) frees the largest temp() files
# first, and the greedy one ranks jobs by priority, then temp() sizes, then input sizes.
# kora's rules declare no temp() file: so only jobs with a temp() input have their sizes
# read, and the others' read as unknown (None, which both schedulers count as 0), the
# greedy one then ranking by priority alone.
class _SizesRead(dict[str, int | None]):
    def __missing__(self, key: str) -> None:
        return None


def read_only_sizes_that_count() -> bool:
    """Snakemake's scheduler reads the input sizes of the jobs with a temp() input only
    (in this process, Snakemake's); False when the installed Snakemake has no such step
    (nothing is changed: tests/test_snakemake_api.py says so)."""
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return False
    read = getattr(JobScheduler, "update_input_sizes", None)
    if read is None:
        return False
    if getattr(read, "kora", False):
        return True

    async def update_input_sizes(self: JobScheduler, jobs: Iterable[Job]) -> None:
        if not isinstance(self._input_sizes, _SizesRead):
            self._input_sizes = _SizesRead(self._input_sizes)
        await read(self, [j for j in jobs if any(f.is_flagged("temp") for f in j.input)])

    update_input_sizes.kora = True  # type: ignore[attr-defined]
    JobScheduler.update_input_sizes = update_input_sizes
    return True


def quote_the_interpreter() -> bool:
    """Snakemake starts a `script:` job as `{py_exec} {fname:q}`, the Python's path not
    quoted (snakemake/snakemake#2645): in a checkout whose path holds a space every job
    failed with exit 127, `bash: .../my: No such file or directory`. Here it is quoted;
    False when the installed Snakemake has no PythonScript (tests/test_paths.py)."""
    try:
        from snakemake.script import PythonScript
    except ImportError:
        return False
    execute = PythonScript._execute_cmd  # wrapped again, it finds nothing more to quote

    def _execute_cmd(self: PythonScript, cmd: str, **kwargs: object) -> object:
        return execute(self, cmd.replace("{py_exec} ", "{py_exec:q} "), **kwargs)

    PythonScript._execute_cmd = _execute_cmd
    return True
