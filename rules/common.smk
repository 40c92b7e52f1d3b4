import os
import sys
import time
import uuid
from pathlib import Path

from kora.config_files import load_run_config
from kora.errors import KoraError
from kora.llm.lifecycle import lifecycle_notes
from kora.shards import missing_token, retry_token
from kora.progress import RUN_ENV, Monitor
from kora.taxonomy import Shard
from kora.workflow import (
    Plan,
    conversations_path,
    judgments_path,
    scenarios_path,
    seeds_path,
)

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
    PLAN = Plan.load(_overlays, Path.cwd(), values=config)
except KoraError as exc:
    raise WorkflowError(str(exc)) from None

os.environ.setdefault(RUN_ENV, uuid.uuid4().hex[:12])


wildcard_constraints:
    **PLAN.wildcard_constraints(),


def shard_of(wc):
    return Shard(PLAN.taxonomy.category_of(wc.risk).id, wc.risk, wc.age, wc.motivation)


def retry_param(pattern):
    # a function of the wildcards only: Snakemake ignores params derived from output
    # files when deciding what to re-run
    return lambda wc: retry_token(pattern.format(**wc))


def get_conversations_input(wc):
    # recorded conversations are final: nothing behind them is generated or called
    if PLAN.target_imported(wc.target):
        return {}
    return {
        "scenarios": scenarios_path(shard_of(wc)),
        "prompts": PLAN.templates("conversations"),
        "taxonomy": PLAN.taxonomy_files(),
    }


def get_target_judgments(wc):
    return [judgments_path(wc.target, s) for s in PLAN.shards()]


def get_results_input(wc):
    return PLAN.results_inputs(wc.target)


def jobs_to_run():
    return [
        (job.rule.name, dict(job.wildcards_dict))
        for job in workflow.dag.needrun_jobs(exclude_finished=False)
    ]


_monitor = Monitor(Path(os.getcwd()), os.environ[RUN_ENV])
_started = time.time()


onstart:
    # a missing key would fail every call of the run one by one: stop before any job
    _jobs = jobs_to_run()
    _models = PLAN.models_for_jobs(_jobs)
    _missing = PLAN.missing_keys(_models)
    if _missing:
        raise WorkflowError(
            "set the API keys this run needs: " + ", ".join(_missing)
        )
    _unreachable = PLAN.unreachable(_models)
    if _unreachable:
        raise WorkflowError("\n".join(_unreachable))
    for _note in lifecycle_notes(PLAN.config, _models):
        print(f"kora: warning: {_note}", file=sys.stderr)
    _monitor.planned = PLAN.nominal_calls(_jobs)
    _monitor.start()


onsuccess:
    _monitor.stop()
    for _line in PLAN.written_summary(since=_started):
        print(f"kora: {_line}", file=sys.stderr)
    # tests that failed must not look like a finished run: name them, exit non-zero
    _incomplete = PLAN.incomplete_results(since=_started)
    if _incomplete:
        print(
            "kora: the run finished with failures:\n"
            + "\n".join(_incomplete)
            + "\nRun the same command again to retry only what failed.",
            file=sys.stderr,
        )
        sys.exit(1)


onerror:
    _monitor.stop()
