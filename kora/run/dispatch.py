"""How a rule's script (scripts/*.py) runs its job: in the run's broker when one serves
this machine, else in its own process.

A local run starts one long-lived broker process (kora.run.broker) that makes the model calls
of every shard job: the SDKs are imported once, one event loop and one connection pool
carry all calls, and the limiter lives in one place. A job's script then only describes
its job (rule, input, output, params, log and the run's transport settings) and waits;
it imports nothing but the standard library, so starting a job costs a fraction of a
second of CPU instead of the second and a half that importing the SDKs costs. On a
cluster node, or without a broker, the job runs in its own process exactly the same way.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import Any

from kora.run.protocol import STOPPED, JobRequest, Reply, connect, read_line

BROKER_ENV = "KORA_BROKER"  # "<host>|<socket path>" of the run's broker
TRANSPORT_FIELDS = (
    "base_url",
    "api_key_env",
    "requests_per_minute",
    "input_tokens_per_minute",
    "output_tokens_per_minute",
    "tokens_per_minute",
    "max_concurrency",
    "timeout",
    "max_reply_bytes",
    "follow_redirects",
    "price",
    "prompt_cache",
    "cache_ttl",
    "batch",
    "structured_output",
    "schema_bounds",
    # a chat service's requests: the params carry them without their headers
    "http",
)
# rules whose jobs call models; the others (aggregation, reports) are CPU work that would
# hold up the broker's event loop, so they run in their own process
BROKERED = frozenset({"seeds", "scenarios", "conversations", "judgments"})


def _files(named: Any) -> dict[str, Any]:
    """A Snakemake Namedlist of files as {name: path or [paths]}."""
    return {
        name: str(value) if isinstance(value, str) else [str(v) for v in value]
        for name, value in named.items()
    }


def model_names(params: Any) -> set[str]:
    """Every model named in a rule's params (a mapping with `name` and `provider`)."""
    if isinstance(params, dict):
        if isinstance(params.get("name"), str) and "provider" in params:
            return {params["name"]}
        return {n for v in params.values() for n in model_names(v)}
    if isinstance(params, list | tuple):
        return {n for v in params for n in model_names(v)}
    return set()


def transport(config: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The run-wide settings the job's models need that do not change results (see
    kora.run.context): taken from the config by model name, for the models its params name."""
    models = config.get("models") or {}
    return {
        "models": {
            n: {k: v for k, v in (models.get(n) or {}).items() if k in TRANSPORT_FIELDS}
            for n in sorted(model_names(params))
        },
        "cache_dir": str(config.get("cache_dir", ".kora/cache")),
        "concurrency": int(config.get("concurrency", 16)),
        # a cap on the bill (kora.llm.budget): it never changes an answer
        "budget": config.get("budget") or None,
    }


def job_spec(rule: str, smk: Any) -> dict[str, Any]:
    """Everything a job is: its rule and exactly that rule's declared files and params."""
    params = dict(smk.params.items())
    return {
        "rule": rule,
        "input": _files(smk.input),
        "output": _files(smk.output),
        "params": params,
        "log": [str(f) for f in smk.log],
        "transport": transport(smk.config, params),
    }


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # a job in its own process then cancels its calls in order


def submit(spec: dict[str, Any]) -> tuple[int, str] | None:
    """Run the job in the broker and wait; None when no broker serves this machine (or it
    went away before answering: the job then runs here, its calls from the store)."""
    where = os.environ.get(BROKER_ENV, "")
    host, _, path = where.partition("|")
    if not path or host != socket.gethostname():
        return None
    try:
        conn = connect(path)
        with conn:
            conn.sendall(JobRequest(spec).encode())
            # the job may take long: no deadline on its answer, but a broker that dies
            # closes the connection, and the job then runs here
            conn.settimeout(None)
            line = read_line(conn)
    except OSError:
        return None
    if line is None:
        return None
    reply = Reply.decode(line)
    return reply.status, reply.message


def run(rule: str, smk: Any) -> None:
    """The whole of a rule's script: run its job, say what went wrong, exit with its status.

    A stop (SIGINT, SIGTERM, the broker's `stopped`) ends it quietly: the run's closing
    lines say what was done and how to go on, a traceback per job would bury them."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        spec = job_spec(rule, smk)
        done = submit(spec) if rule in BROKERED else None
        if done is None:
            from kora.run.entries import run_here

            done = run_here(spec)
    except KeyboardInterrupt:
        raise SystemExit(STOPPED) from None
    status, message = done
    if message:
        from kora.llm.masking import terminal_safe  # it may quote a server's words

        print(terminal_safe(message), file=sys.stderr)
    if status:
        raise SystemExit(status)
