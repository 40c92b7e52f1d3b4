"""The rest of a job's script once the run's broker has its job: wait for the answer, say
what it says, exit with its status (`wait`, `finish`).

A script that handed its job over has nothing left to do but wait, yet it holds what
Snakemake's `script:` preamble loaded to give it its job (26 MB, most of it
`snakemake.script`), and a run has a script waiting for each job the broker runs. So the
script replaces itself (exec, same process, same connection) by an interpreter started
without `site` that imports this module, the answer's format and the terminal's filter
only: 11.5 MB resident (`ps` during bench/full_grid.py). Should the broker go away before
it answers, the wait runs the script again (the command it was started with), told that
no broker serves it, and the job runs there, its calls from the store.
"""

from __future__ import annotations

import os
import signal
import socket
import sys

from kora.llm.masking import terminal_safe
from kora.run.reply import STOPPED, Outcome, ProtocolError, read_line

# what the interpreter runs: kora's folder comes first on its path, there being no `site`
COMMAND = "import sys; sys.path.insert(0, sys.argv[1]); import kora.run.waiter as w; w.wait()"


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(STOPPED)  # a stop ends the job quietly: the run's closing lines tell


def finish(done: Outcome) -> None:
    """Say what the job tells the user (it may quote a server's words: nothing a terminal
    would act on) and end with the job's status."""
    if done.message:
        print(terminal_safe(done.message), file=sys.stderr)
    if done.status:
        raise SystemExit(done.status)


def answer(conn: socket.socket) -> Outcome | None:
    """The broker's answer on `conn`; None when the broker went away first."""
    try:
        line = read_line(conn)
    except OSError:
        return None
    if line is None:
        return None
    try:
        return Outcome.decode(line)
    except ProtocolError as exc:
        return Outcome(1, f"kora: the run's broker answered what no job's script reads: {exc}")


def wait() -> None:
    """`COMMAND`'s body: argv is kora's folder, the connection's descriptor, then the
    command that runs the script again should the broker go away."""
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    fd, rerun = int(sys.argv[2]), sys.argv[3:]
    with socket.socket(fileno=fd) as conn:
        done = answer(conn)
    if done is None:
        # as the shell prefix started the script: a Ctrl-C in its first moments is ignored
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.execv(rerun[0], rerun)
    finish(done)
    raise SystemExit(0)
