"""How a rule's script (scripts/*.py) runs its job: in the run's broker when one serves
this machine, else in its own process.

A local run starts one long-lived broker process (kora.run.broker.server) that makes the model calls
of every shard job: the SDKs are imported once, one event loop and one connection pool
carry all calls, and the limiter lives in one place. A job's script then only describes
its job (rule, input, output, params, log and the run's transport settings), hands it
over and waits as a shell (kora.run.transport.waiter), so starting a job costs a fraction of a
second of CPU instead of the second and a half that importing the SDKs costs. On a
cluster node, or without a broker, the job runs in its own process exactly the same way.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from types import FrameType
from typing import Any

from kora.run.stages import ORDER
from kora.run.transport.jobspec import JobSpec
from kora.run.transport.protocol import RUN_ENV, JobRequest, connect, say_stopping, stopping_path
from kora.run.transport.reply import STOPPED
from kora.run.transport.waiter import SHELL, answer, finish
from kora.run.transport.waiter import argv as waiter_argv

BROKER_ENV = "KORA_BROKER"  # "<host>|<socket path>" of the run's broker


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # SIGTERM: a job in its own process then cancels its calls in order, and ends quietly;
    # it may be meant for this job alone (a cluster's time limit), not the run's stop
    raise SystemExit(STOPPED)


def _stop_within(error: BaseException) -> BaseException | None:
    """The stop an error came of, if it did: a stop that arrives inside an import can come
    out wrapped (a class's __set_name__ turns what it raises into a RuntimeError)."""
    seen: BaseException | None = error
    while seen is not None and not isinstance(seen, KeyboardInterrupt | SystemExit):
        seen = seen.__cause__ or seen.__context__
    return seen


def hand_over(spec: JobSpec) -> socket.socket | None:
    """Give the job to the run's broker: the connection its answer will come on, or None
    when no broker serves this machine."""
    where = os.environ.get(BROKER_ENV, "")
    host, _, path = where.partition("|")
    if not path or host != socket.gethostname():
        return None
    try:
        conn = connect(path)
    except OSError:
        return None
    try:
        conn.sendall(JobRequest(spec).encode())
    except OSError:
        conn.close()
        return None
    # the job may take long: no deadline on its answer, but a broker that dies closes the
    # connection, and the job then runs here
    conn.settimeout(None)
    return conn


def wait_small(conn: socket.socket) -> None:
    """Wait for the broker's answer as a shell (kora.run.transport.waiter), in this process, on this
    connection; returns only if the shell could not start."""
    os.set_inheritable(conn.fileno(), True)
    rerun = [sys.executable, *sys.orig_argv[1:]]
    run = os.environ.get(RUN_ENV)
    stopping = str(stopping_path(os.getcwd(), run)) if run else ""
    os.environ[BROKER_ENV] = ""  # should the broker go away, the script runs again here
    # the shell's first line traps a stop; it cannot trap one it was started ignoring, so
    # it starts with the defaults: a stop in its first moment (its start, under a
    # millisecond) ends the job as the signal does, any later one quietly
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.execv(SHELL, waiter_argv(conn.fileno(), stopping, rerun))
    except OSError:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _interrupt)


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
        done = None
        # a stage's job calls models: to the broker; the others (aggregation, reports) are
        # CPU work that would hold up the broker's event loop, so they run here
        conn = hand_over(spec) if rule in ORDER else None
        if conn is not None:
            wait_small(conn)
            with conn:
                done = answer(conn)
        if done is None:
            run = os.environ.get(RUN_ENV)
            if run and stopping_path(os.getcwd(), run).exists():
                raise KeyboardInterrupt  # the run is stopping: its broker is gone on purpose
            from kora.run.broker.execute import run_here

            done = run_here(spec)
    except (KeyboardInterrupt, Exception) as error:
        stop = _stop_within(error)
        if stop is None:
            raise
        if isinstance(stop, KeyboardInterrupt):
            # Ctrl-C reaches every process of the run at once: a job that ends on it before
            # the run's Snakemake has run its handler must not read as a job that failed
            say_stopping(os.getcwd(), os.environ.get(RUN_ENV))
        raise SystemExit(STOPPED) from None
    finish(done)
