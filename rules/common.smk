# Config validation, the run's checks and progress line, and the input and param
# functions of the rules (their logic lives in kora.run.pipeline, typed and tested).
import os
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

from kora.run.broker import send_ahead, start_broker
from kora.config.files import load_run_config
from kora.run.dispatch import BROKERED, job_spec
from kora.errors import KoraError
from kora.llm.lifecycle import lifecycle_notes
from kora.llm.structured import config_warnings
from kora.run.preflight import check_models, models_for_jobs
from kora.run.progress import RUN_ENV, Monitor
from kora.run.layout import CELL, TARGET
from kora.run.shards import missing_token, rejected_of, retry_token, status_of
from kora.run.stops import closing_summary, rerun_advice
from kora.run.pipeline import Pipeline

# Read config.yaml and every --configfile overlay with the project's loader first: it
# names the file and line of a YAML problem or of a bad value, which Snakemake's own
# reading does not. `workflow.configfiles` (the overlays given on the command line) has
# no public accessor; it is read before `configfile:` below adds config.yaml to it.
_overlays = list(workflow.configfiles)
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


def cell(wc):
    return {"risk": wc.risk, "age": wc.age, "motivation": wc.motivation}


def retry_param(pattern):
    # a function of the wildcards only: Snakemake ignores params derived from output
    # files when deciding what to re-run
    return lambda wc: retry_token(pattern.format(**wc))


def _needrun():
    # There is no public Snakemake API for the jobs a run will execute; `onstart` needs
    # them to check only the keys and services those jobs call, and to hand the broker
    # the shard jobs to work ahead of.
    return workflow.dag.needrun_jobs(exclude_finished=False)


def shard_job_specs():
    return [
        job_spec(job.rule.name, SimpleNamespace(input=job.input, output=job.output,
                 params=job.params, log=job.log, config=config))
        for job in _needrun()
        if job.rule.name in BROKERED
    ]  # fmt: skip


def jobs_to_run():
    return [(job.rule.name, dict(job.wildcards_dict)) for job in _needrun()]


_monitor = Monitor(Path(os.getcwd()), os.environ[RUN_ENV])
_monitor.batches = Path(PIPELINE.config.cache_dir).parent / "batches"
_started = time.time()
_broker = None


onstart:
    global _broker
    _jobs = jobs_to_run()
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
    # works through the run's shard jobs ahead of them (kora.run.prefetch). Only when the jobs
    # run here: `workflow.local_exec` (no public accessor) is false under a cluster
    # executor, whose jobs run on other machines. KORA_NO_BROKER=1 runs every job in its
    # own process (the results are the same).
    if workflow.local_exec and not os.environ.get("KORA_NO_BROKER"):
        _broker = start_broker(os.environ[RUN_ENV], Path("logs") / "broker.log")
        if _broker is not None:
            send_ahead(_broker, shard_job_specs())
    _monitor.planned = PIPELINE.nominal_calls(_jobs)
    _monitor.start()


onsuccess:
    _monitor.stop()
    if _broker is not None:
        _broker.stop()
    for _line in PIPELINE.written_summary(since=_started):
        print(f"kora: {_line}", file=sys.stderr)
    # tests that failed must not look like a finished run: name them, exit non-zero
    _incomplete = PIPELINE.incomplete_results(since=_started)
    if _incomplete:
        print(
            "kora: the run finished with failures:\n"
            + "\n".join(_incomplete)
            + "\n"
            + rerun_advice(_incomplete),
            file=sys.stderr,
        )
        sys.exit(1)


onerror:
    _monitor.stop()
    if _broker is not None:
        _broker.stop()
    # a job stopped by a configuration error or an unreachable service: which one, and
    # what to do before running again
    for _line in closing_summary(Path.cwd(), os.environ[RUN_ENV]):
        print(f"kora: {_line}", file=sys.stderr)
