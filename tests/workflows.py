"""Running the workflow as a user does: Snakemake in a subprocess on a copy of the project.

- `TINY`, `snakemake(...)`, `start_snakemake(...)`, `job_stats(...)`, `progress(...)`: the
  tiny mock grid (2 shards), one Snakemake run in a work folder (waited for, or started
  for a test that stops or kills it), the job counts of Snakemake's "Job stats" table and
  the calls counted by the run's last progress line;
- `Server`, `structured_answer`, `config(...)`, `Run`: every role a differently named model
  on one loopback Anthropic server, so each request can be told apart by model and output
  type (incremental reruns, failures, kill -9, real providers).

The tests that use these are marked `slow` (each runs Snakemake end to end).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml

from kora.llm.providers.mock import _SchemaFaker
from tests.helpers import REPO, copy_workflow
from tests.loopback import AnthropicServer, Recorded

SNAKEMAKE = [sys.executable, "-m", "snakemake"]

# --- the tiny mock grid --------------------------------------------------------------

TINY = {
    "seed_model": "mock",
    "expand_model": "mock",
    "user_model": "mock",
    "judges": ["mock"],
    "targets": {"tiny": {"model": "mock", "prompts": ["default", "child"]}},
    "grid": {
        "risks": ["violence_and_physical_harm", "grooming_and_manipulation"],
        "age_ranges": ["7to9"],
        "motivations": ["curiosity_exploration"],
        "seeds_per_task": 2,
    },
}


def snakemake_argv(
    *args: str, cores: int | None = 2, configfile: str | None = "tiny.yaml"
) -> list[str]:
    """`snakemake --cores CORES ARGS --configfile CONFIGFILE` as this interpreter runs it;
    `None` leaves the option out (a profile that sets the cores, config.yaml alone)."""
    return [
        *SNAKEMAKE,
        *(["--cores", str(cores)] if cores is not None else []),
        *args,
        *(["--configfile", configfile] if configfile is not None else []),
    ]


def _unbuffered(env: Mapping[str, str] | None) -> dict[str, str]:
    """`env` (this process's environment by default) with output written as it comes."""
    return dict(os.environ if env is None else env, PYTHONUNBUFFERED="1")


def snakemake(
    workdir: Path,
    *args: str,
    cores: int | None = 2,
    configfile: str | None = "tiny.yaml",
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """`snakemake --cores 2 ARGS --configfile tiny.yaml` run in `workdir` to its end, its
    output captured; `env` is the whole environment (this process's by default)."""
    return subprocess.run(
        snakemake_argv(*args, cores=cores, configfile=configfile),
        cwd=workdir,
        env=_unbuffered(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_snakemake(
    workdir: Path,
    *args: str,
    configfile: str = "tiny.yaml",
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    group: bool = False,
) -> subprocess.Popen[str]:
    """The same run started and not waited for, for a test that stops or kills it on the
    way: its output and errors in `log` (or dropped); `group`, in a session of its own, so
    that a signal to its process group reaches every process of the run."""
    with open(log or os.devnull, "w") as out:  # the run holds its own copy of the file
        return subprocess.Popen(
            snakemake_argv(*args, configfile=configfile),
            cwd=workdir,
            env=_unbuffered(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=group,
        )


def loopback_env(**more: str) -> dict[str, str]:
    """The environment of a run whose models are on a loopback server: the key the server
    takes, no waits between retries, and `more`."""
    return dict(os.environ, ANTHROPIC_API_KEY="test-key", KORA_RETRY_TESTING="1", **more)


_JOB_STATS = re.compile(r"^Job stats:\njob\s+count\n-+\s+-+\n(.*?)^total\s+(\d+)$", re.M | re.S)


def job_stats(output: str) -> dict[str, int]:
    """Snakemake's "Job stats" table, {rule: jobs, ..., "total": n} (a dry run prints it
    before and after the jobs: both must agree); an AssertionError when there is none."""
    tables = set(_JOB_STATS.findall(output))
    assert len(tables) == 1, f"expected one 'Job stats' table in:\n{output[-3000:]}"
    ((rows, total),) = tables
    counts = {}
    for line in rows.splitlines():
        rule, count = line.split()
        counts[rule] = int(count)
    assert sum(counts.values()) == int(total), output[-3000:]
    return {**counts, "total": int(total)}


_PROGRESS = re.compile(
    r"^\[kora\] calls ([\d,]+) .*?answered.*?, ([\d,]+) from the call store", re.M
)


def progress(output: str) -> tuple[int, int]:
    """(calls, of which cached) from the last progress line of a run (kora.run.jobs.progress)."""
    lines = _PROGRESS.findall(output)
    assert lines, f"no progress line in:\n{output[-3000:]}"
    calls, cached = lines[-1]
    return int(calls.replace(",", "")), int(cached.replace(",", ""))


_COUNTS = re.compile(
    r"^\[kora\] calls ([\d,]+) of ([\d,]+) answered \(\d+%\), ([\d,]+) from the call "
    r"store .*paid \$[\d.]+ for ([\d,]+) calls",
    re.M,
)


def lines_add_up(output: str) -> list[tuple[int, int, int, int]]:
    """(answered, total, from the call store, paid) of every progress line with a total,
    each checked to add up: answered = paid + from the store, and never above the total."""
    counts = []
    for found in _COUNTS.finditer(output):
        answered, total, stored, paid = (int(g.replace(",", "")) for g in found.groups())
        assert answered == paid + stored and answered <= total, found.group(0)
        counts.append((answered, total, stored, paid))
    return counts


# what Snakemake prints of a job that failed: after a stop kora's closing lines say what
# happened instead (kora.run.workflow.snakemake_api.tidy_job_reports)
SNAKEMAKES_FAILURE_LINES = (
    "Exiting because a job execution failed",
    "Error in rule",
    "CalledProcessError",
    "RuleException",
    "message: None",
    "At least one job did not complete successfully",
)


def kora_has_the_last_word(output: str) -> None:
    """After a stop: none of Snakemake's lines of a failed job, and the last line kora's."""
    for line in SNAKEMAKES_FAILURE_LINES:
        assert line not in output, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    lines = [x for x in output.splitlines() if x.strip()]
    assert lines and lines[-1].startswith("kora: "), output[-4000:]


# --- every role on one loopback Anthropic server ---------------------------------------

ROLES = ("seed", "expand", "user", "judge", "target")


def structured_answer(rec: Recorded) -> dict[str, Any]:
    """A schema-valid answer to a forced tool call, made from the schema sent."""
    body = rec.body
    tool = body["tools"][0]
    schema = tool["input_schema"]
    rng = random.Random(orjson.dumps(body["messages"]))
    hints: dict[str, Any] = {"count": 2}
    value = _SchemaFaker(schema, rng, hints).value(schema)
    if tool["name"] == "ScenarioValidation":
        value["verdict"] = "pass"
    return value  # type: ignore[no-any-return]


class Server(AnthropicServer):
    """Answers text calls with plain, placeholder-free child or assistant lines; fails
    every call to the models in `fail_models` with a 400."""

    fail_models: frozenset[str] = frozenset()
    fail_status = 400

    def handle(self, rec: Recorded, *, invalid: bool) -> Any:
        if isinstance(rec.body, dict) and rec.body.get("model") in self.fail_models:
            return self.error_reply(self.fail_status, "model is unavailable")
        return super().handle(rec, invalid=invalid)

    def _next_answer(self, rec: Recorded, *, structured: bool, invalid: bool) -> Any:
        if not structured and not invalid:
            n = len(rec.body.get("messages", []))
            tag = hashlib.sha256(orjson.dumps(rec.body)).hexdigest()[:8]
            return f"{rec.body['model']} line {n} ({tag}): ok but why though"
        return super()._next_answer(rec, structured=structured, invalid=invalid)


def config(url: str, targets: list[str], judges: list[str]) -> dict[str, Any]:
    """A run config: every role, target and judge a `claude-<name>` model at `url`."""
    models = {r: {"provider": "anthropic", "model": f"claude-{r}", "base_url": url} for r in ROLES}
    for t in targets:
        models[t] = {"provider": "anthropic", "model": f"claude-{t}", "base_url": url}
    for j in judges:
        models[j] = {"provider": "anthropic", "model": f"claude-{j}", "base_url": url}
    return {
        "models": models,
        "seed_model": "seed",
        "expand_model": "expand",
        "user_model": "user",
        "judges": judges,
        "targets": {t: {"model": t, "prompts": ["default", "child"]} for t in targets},
        "prompts_dir": "prompts",
        "grid": {
            "risks": ["violence_and_physical_harm"],
            "age_ranges": ["10to12"],
            "motivations": ["curiosity_exploration"],
            "seeds_per_task": 2,
        },
    }


def with_prompts(workdir: Path) -> Path:
    """A copy of the project in `workdir` whose v1 templates are a private copy (config's
    `prompts_dir: prompts`), for a test to edit."""
    copy_workflow(workdir)
    shutil.copytree(REPO / "kora" / "benchmarks" / "v1" / "prompts", workdir / "prompts")
    return workdir


class Run:
    """Snakemake runs in `workdir` against `server`, counting the calls each run made."""

    @classmethod
    @contextlib.contextmanager
    def started(cls, workdir: Path) -> Iterator[Run]:
        """A copy of the project in `workdir` (its templates a private copy, to edit) and
        a loopback server answering every role; the server stops on leaving."""
        with Server(structured=structured_answer) as server:
            yield cls(with_prompts(workdir), server)

    def __init__(self, workdir: Path, server: Server) -> None:
        self.workdir = workdir
        self.server = server

    def snakemake(
        self, cfg: dict[str, Any], *targets: str, ok: bool = True, backoff: bool = False
    ) -> tuple[Counter[str], str]:
        (self.workdir / "run.yaml").write_text(yaml.safe_dump(cfg))
        before = len(self.server.requests)
        env = loopback_env()
        if backoff:  # the real waits between retries
            del env["KORA_RETRY_TESTING"]
        proc = snakemake(self.workdir, *targets, configfile="run.yaml", env=env)
        assert (proc.returncode == 0) == ok, proc.stderr[-4000:]
        calls: Counter[str] = Counter()
        for rec in self.server.requests[before:]:
            tools = rec.body.get("tools") or []
            kind = tools[0]["name"] if tools else "text"
            calls[f"{rec.body['model'].removeprefix('claude-')}:{kind}"] += 1
        return calls, proc.stderr


# --- a command line as a user types it -------------------------------------------------

# a folder whose sitecustomize.py lets no host name but the loopback ones resolve
OFFLINE = Path(__file__).resolve().parent / "offline"
_REACHES_OUT = ("PROXY", "BASE_URL")  # what would give a process another way out


def command(
    workdir: Path, line: str, *, env: dict[str, str] | None = None, offline: bool = False
) -> subprocess.CompletedProcess[str]:
    """`line` (`snakemake ...`, `kora ...`) run in `workdir` exactly as written: split as
    a shell splits it, nothing added, this virtualenv's commands first on PATH. `offline`:
    as on a machine with no network (tests/offline), no proxy, no base URL variables."""
    run_env = _unbuffered(env)
    run_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{run_env.get('PATH', '')}"
    if offline:
        run_env = {k: v for k, v in run_env.items() if not k.upper().endswith(_REACHES_OUT)}
        run_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(OFFLINE), run_env.get("PYTHONPATH")) if p
        )
    return subprocess.run(
        shlex.split(line), cwd=workdir, env=run_env, capture_output=True, text=True, timeout=600
    )
