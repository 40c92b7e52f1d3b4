# Config validation, the run's checks and progress line, and the input and param
# functions of the rules (their logic lives in kora.run.workflow.pipeline, typed and tested).
import os
import sys
import uuid
from functools import partial
from pathlib import Path

from kora.config.files import check_checkout, load_run_config
from kora.errors import KoraError
from kora.run import runlock
from kora.run.jobs import stops
from kora.run.jobs.progress import RUN_ENV
from kora.run.jobs.shards import missing_token
from kora.run.session import RunSession
from kora.run.workflow import gather_inputs, outputs, snakemake_api, unknown_files
from kora.run.workflow.pipeline import Pipeline

# Read config.yaml, every --configfile overlay and the --config values with the project's
# loader first: it names the file and line of a YAML problem or of a bad value (or the
# --config value), which Snakemake's own reading does not. Snakemake's internals are read
# in kora.run.workflow.snakemake_api only.
_overlays = snakemake_api.overlays(workflow)
try:
    check_checkout(Path.cwd())  # this checkout's own code and templates, or none
    load_run_config(
        _overlays, workdir=Path.cwd(), given=snakemake_api.config_values(workflow)
    )
except KoraError as exc:
    snakemake_api.stop(exc)


configfile: "config.yaml"


# Validate the merged config (Snakemake's, which also holds --config) before any job runs.
try:
    PIPELINE = Pipeline.load(_overlays, Path.cwd(), values=config)
except KoraError as exc:
    snakemake_api.stop(exc)

os.environ.setdefault(RUN_ENV, uuid.uuid4().hex[:12])

# a Snakemake killed outright (kill -9, a lost machine) leaves its locks behind: cleared
# when no Snakemake of this workspace is alive, so the same command goes on
_store_busy = partial(runlock.busy, PIPELINE.config.cache_dir)
for _lock in snakemake_api.stale_locks(Path.cwd(), _store_busy):
    _lock.unlink(missing_ok=True)
    print(f"kora: removed {_lock}, left by a run that was killed", file=sys.stderr)
# a second run asking for the files a live one makes is refused naming it, never told
# to remove the live run's locks (`--unlock`)
snakemake_api.refuse_a_second_run(workflow, _store_busy)


wildcard_constraints:
    **PIPELINE.wildcard_constraints(),


# a file asked on the command line that no rule can make (a target the config lacks,
# another version's folder, a misspelt file of a target) ends the command before
# Snakemake looks for its rule
snakemake_api.check_targets(
    workflow, lambda paths, made: unknown_files.unknown_request(PIPELINE, paths, made)
)
# `snakemake --report` packs the results there are: rule all asks only for those then;
# none there (a report asked without the run's --configfile) packs nothing
REPORTING = snakemake_api.reporting(
    workflow, lambda: outputs.nothing_to_report(PIPELINE)
)


def _needrun():
    # the jobs this run executes: `onstart` checks only the keys and services they call,
    # hands the broker the shard jobs to work ahead of, and counts their calls
    return [snakemake_api.job_parts(job) for job in snakemake_api.jobs_to_run(workflow)]


# A job's script starts with Ctrl-C ignored: a Ctrl-C (or `timeout -s INT`) in its first
# moments, while Python loads Snakemake's preamble, would end it with a traceback; once
# kora.run.broker.dispatch runs, it takes Ctrl-C on again and ends the job quietly.
shell.prefix("set -euo pipefail; trap '' INT; ")

# the run's start, end and stops (kora.run.session)
SESSION = RunSession(PIPELINE, os.environ[RUN_ENV])
# while the run is being stopped (its stops folder holds a job's note of the budget or of
# an error no retry gets past, or the mark a stop leaves), Snakemake's reports of the jobs
# the stop ended are not shown: the closing lines say what happened
snakemake_api.tidy_job_reports(
    lambda: stops.stops_dir(PIPELINE.workdir, SESSION.run_id).exists()
)
snakemake_api.keep_dataframes_out()
snakemake_api.read_only_sizes_that_count()
snakemake_api.quote_the_interpreter()


onstart:
    try:
        SESSION.start(
            _needrun(),
            config,
            # the broker serves jobs that run here (not under a cluster executor) and in
            # this environment (not in software environments of their own, --use-conda)
            shared=snakemake_api.runs_locally(workflow)
            and not snakemake_api.isolated_software(workflow),
        )
    except KoraError as exc:
        snakemake_api.stop(exc)


onsuccess:
    if SESSION.succeeded():
        sys.exit(1)


onerror:
    # a stop ends here, its closing lines last, with a shell's status for it
    _status = SESSION.failed()
    if _status is not None:
        sys.exit(_status)
