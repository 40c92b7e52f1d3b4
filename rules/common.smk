# Config validation, the run's checks and progress line, and the input and param
# functions of the rules (their logic lives in kora.run.pipeline, typed and tested).
import os
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

from kora.run import requests, seam
from kora.run.broker import send_ahead, start_broker
from kora.config.files import load_run_config
from kora.run.dispatch import BROKERED, job_spec
from kora.run.groups import split
from kora.errors import KoraError
from kora.llm.bill import bill_dir
from kora.llm.lifecycle import lifecycle_notes
from kora.llm.structured import config_warnings
from kora.run.preflight import check_models, models_for_jobs
from kora.run.progress import RUN_ENV, Monitor, unstored_warning
from kora.run.runlock import hold
from kora.run.shards import missing_token
from kora.run.stops import closing_summary, rerun_advice
from kora.run.pipeline import Pipeline
from kora.run.plan import count_calls

# Read config.yaml and every --configfile overlay with the project's loader first: it
# names the file and line of a YAML problem or of a bad value, which Snakemake's own
# reading does not. Snakemake's internals are read in kora.run.seam only.
_overlays = seam.overlays(workflow)
try:
    load_run_config(_overlays, workdir=Path.cwd())
except KoraError as exc:
    raise WorkflowError(str(exc)) from None


configfile: "config.yaml"


# Validate the merged config (Snakemake's, which also holds --config) before any job runs.
try:
    PIPELINE = Pipeline.load(_overlays, Path.cwd(), values=config)
except KoraError as exc:
    raise WorkflowError(str(exc)) from None

os.environ.setdefault(RUN_ENV, uuid.uuid4().hex[:12])


wildcard_constraints:
    **PIPELINE.wildcard_constraints(),


def misdirected(path):
    # the input function of rules/requests.smk: what is wrong with a file asked of the run
    raise WorkflowError(requests.unknown_request(PIPELINE, [path]))


def _needrun():
    # the jobs this run executes: `onstart` checks only the keys and services they call,
    # hands the broker the shard jobs to work ahead of, and counts their calls
    return [seam.job_parts(job) for job in seam.jobs_to_run(workflow)]


def shard_job_specs(jobs):
    # each cell of each shard job (a job holds a risk's cells: kora.run.groups)
    return [
        cell
        for name, _, i, o, p, log in jobs
        if name in BROKERED
        for cell in split(
            job_spec(
                name,
                SimpleNamespace(input=i, output=o, params=p, log=log, config=config),
            )
        )
    ]


_monitor = Monitor(
    Path(os.getcwd()),
    os.environ[RUN_ENV],
    bill=bill_dir(Path(PIPELINE.config.cache_dir)),
)
_monitor.batches = Path(PIPELINE.config.cache_dir).parent / "batches"
_started = time.time()
_broker = None
_lock = None


onstart:
    global _broker, _lock
    # one run at a time on the call store (kora.run.runlock): a second one, started with
    # --nolock, would pay for the calls the first is paying for
    try:
        _lock = hold(Path.cwd() / PIPELINE.config.cache_dir, "snakemake run")
    except KoraError as exc:
        raise WorkflowError(str(exc)) from None
    _needed = _needrun()
    _jobs = [(name, wc) for name, wc, *_ in _needed]
    _specs = shard_job_specs(_needed)
    _models = models_for_jobs(PIPELINE.config, _jobs)
    # a missing key or a service down would fail every call of the run one by one: stop
    # before any job (unless a fallback chain has another model to take its calls)
    _errors, _warnings = check_models(PIPELINE.config, _models)
    if _errors:
        raise WorkflowError("\n".join(_errors))
    for _note in _warnings:
        print(f"kora: warning: {_note}", file=sys.stderr)
    for _note in lifecycle_notes(PIPELINE.config.models, _models):
        print(f"kora: warning: {_note}", file=sys.stderr)
    for _name in sorted(_models):
        for _note in config_warnings(_name, PIPELINE.config.models[_name]):
            print(f"kora: warning: {_note}", file=sys.stderr)
    # One process makes the model calls of every job on this machine (kora.run.broker) and
    # works through the run's shard jobs ahead of them (kora.run.prefetch). Only when the
    # jobs run here (not under a cluster executor) and in this environment (not in
    # software environments of their own, --use-conda). KORA_NO_BROKER=1 runs every job in
    # its own process (the results are the same).
    _shared = seam.runs_locally(workflow) and not seam.isolated_software(workflow)
    if _shared and not os.environ.get("KORA_NO_BROKER"):
        _broker = start_broker(
            os.environ[RUN_ENV], Path(PIPELINE.layout.log("broker"))
        )
        if _broker is not None:
            send_ahead(_broker, _specs)
    # the line's total: the calls `kora plan` counts for the jobs this run runs
    _monitor.shards = len(_specs)
    _monitor.plan(lambda: count_calls(PIPELINE, _specs))
    _monitor.start()


onsuccess:
    _totals = _monitor.stop()
    if _broker is not None:
        _broker.stop()
    for _line in requests.written_summary(PIPELINE, since=_started):
        print(f"kora: {_line}", file=sys.stderr)
    # tests that failed must not look like a finished run: name them, exit non-zero
    _incomplete = requests.incomplete_results(PIPELINE, since=_started)
    if _incomplete:
        print(
            "kora: the run finished with failures:\n"
            + "\n".join(_incomplete)
            + "\n"
            + rerun_advice(_incomplete),
            file=sys.stderr,
        )
    # paid answers the call store could not keep (a full disk): said loudly, non-zero
    _unstored = unstored_warning(_totals, PIPELINE.config.cache_dir)
    if _unstored:
        print(f"kora: ERROR: {_unstored}", file=sys.stderr)
    if _lock is not None:
        _lock.release()
    if _incomplete or _unstored:
        sys.exit(1)


onerror:
    _totals = _monitor.stop()
    if _broker is not None:
        _broker.stop()
    # a job stopped by a configuration error or an unreachable service: which one, and
    # what to do before running again
    for _line in closing_summary(Path.cwd(), os.environ[RUN_ENV]):
        print(f"kora: {_line}", file=sys.stderr)
    _unstored = unstored_warning(_totals, PIPELINE.config.cache_dir)
    if _unstored:
        print(f"kora: ERROR: {_unstored}", file=sys.stderr)
    if _lock is not None:
        _lock.release()
