"""The rest of a job's script once the run's broker has its job: wait for the answer, say
what it says, exit with its status.

A script that handed its job over has nothing left to do but wait, yet it holds what
Snakemake's `script:` preamble loaded to give it its job (26 MB, most of it
`snakemake.script`), and a run has a script waiting for each job the broker runs. So the
script replaces itself (exec, same process, same connection) by the POSIX shell running
`SCRIPT`: 1.7 MB resident, where an interpreter started without `site` took 10-11.5 MB,
and a whole grid's ten or so waiting jobs 130 MB of the run's peak (bench/full_grid.py).
The broker's answer is one line (`Outcome.encode`) the shell reads and prints as it is.
Should the broker go away before it answers, the shell runs the script again (the command
it was started with), told that no broker serves it, and the job runs there, its calls
from the store. `answer` and `finish` do the same in Python where no shell can start.
"""

from __future__ import annotations

import socket
import sys

from kora.llm.masking import terminal_safe
from kora.run.transport.reply import Outcome, ProtocolError, read_line

SHELL = "/bin/sh"
UNREAD = "kora: the run's broker answered what no job's script reads"
# $1: the connection's descriptor; $2: the file a Ctrl-C leaves (kora.run.broker.dispatch, run);
# the rest: the command that runs the script again. A stop (SIGINT, SIGTERM) ends the wait
# quietly: the run's closing lines tell. The status is checked for digits before `exit` is
# given it; the message's backslashes and newlines come escaped for printf's %b
# (`Outcome.encode`).
SCRIPT = r"""trap 'exit 130' TERM
trap '[ -z "$stop" ] || { mkdir -p "${stop%/*}" && : >"$stop"; } 2>/dev/null; exit 130' INT
fd=$1 stop=$2
shift 2
if eval "IFS= read -r line <&$fd"; then
    case $line in
        [0-9]*" "*) status=${line%%" "*} message=${line#*" "} ;;
        *) status=x ;;
    esac
    case $status in
        ""|*[!0-9]*)
            echo "@UNREAD@" >&2
            exit 1 ;;
    esac
    [ -z "$message" ] || printf '%b\n' "$message" >&2
    exit "$status"
fi
eval "exec $fd<&-"
trap '' INT
trap - TERM
exec "$@"
""".replace("@UNREAD@", UNREAD)


def argv(fd: int, stopping: str, rerun: list[str]) -> list[str]:
    """The shell's command line: wait on descriptor `fd`, else run `rerun`; a Ctrl-C
    leaves the file `stopping` (none: "")."""
    return [SHELL, "-c", SCRIPT, "kora-waiter", str(fd), stopping, *rerun]


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
        return Outcome(1, f"{UNREAD}: {exc}")
