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

from kora.run.jobspec import JobSpec
from kora.run.protocol import (
    RUN_ENV,
    STOPPED,
    JobRequest,
    Outcome,
    connect,
    read_line,
    stopping_path,
)

BROKER_ENV = "KORA_BROKER"  # "<host>|<socket path>" of the run's broker
# rules whose jobs call models (every stage of kora.run.stages: tests/test_groups.py); the
# others (aggregation, reports) are CPU work that would hold up the broker's event loop,
# so they run in their own process. A literal: the scripts import nothing heavy
BROKERED = frozenset({"seeds", "scenarios", "conversations", "judgments"})


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # a job in its own process then cancels its calls in order


def submit(spec: JobSpec) -> Outcome | None:
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
    return Outcome.decode(line)


def run(rule: str, smk: Any) -> None:
    """The whole of a rule's script: run its job, say what went wrong, exit with its status.

    A stop (SIGINT, SIGTERM, the broker's `stopped`) ends it quietly: the run's closing
    lines say what was done and how to go on, a traceback per job would bury them."""
    # the script started with Ctrl-C ignored (the Snakefile's shell prefix), so that one
    # in its first moments leaves no traceback: from here on it ends the job quietly
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        spec = JobSpec.of(rule, smk.input, smk.output, smk.params, smk.log, smk.config)
        done = submit(spec) if rule in BROKERED else None
        if done is None:
            run = os.environ.get(RUN_ENV)
            if run and stopping_path(os.getcwd(), run).exists():
                raise KeyboardInterrupt  # the run is stopping: its broker is gone on purpose
            from kora.run.execute import run_here

            done = run_here(spec)
    except KeyboardInterrupt:
        raise SystemExit(STOPPED) from None
    status, message = done.status, done.message
    if message:
        from kora.llm.masking import terminal_safe  # it may quote a server's words

        print(terminal_safe(message), file=sys.stderr)
    if status:
        raise SystemExit(status)
