"""A job's answer as it travels back from the broker (`Outcome`), and the one read of a
line both sides use. The answer is a line a POSIX shell can read and print as it is: the
job's script waits for it as a shell (kora.run.transport.waiter).
"""

from __future__ import annotations

import re
import socket

from kora.llm.masking import terminal_safe

# a job's status when the run was stopped while it ran (128 + SIGINT, as a shell says it)
STOPPED = 130


class ProtocolError(Exception):
    """A message that is not what the other side must send."""


class Outcome:
    """A job's exit status and what it tells the user (its stderr): what the job's runner
    (kora.run.broker.execute) returns, and the broker's answer on the wire."""

    __slots__ = ("message", "status")

    def __init__(self, status: int, message: str = "") -> None:
        self.status = status
        self.message = message

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outcome):
            return NotImplemented
        return (self.status, self.message) == (other.status, other.message)

    def __hash__(self) -> int:
        return hash((self.status, self.message))

    def __repr__(self) -> str:
        return f"Outcome({self.status!r}, {self.message!r})"

    def encode(self) -> bytes:
        """On the wire, one line the waiting job's shell reads (kora.run.transport.waiter): the
        status (0-255, as `exit` takes it; 1 for any other), a space, and the message made
        safe for a terminal, its backslashes doubled and its newlines written `\\n` for
        printf's %b."""
        status = self.status if 0 <= self.status <= 255 else 1
        text = terminal_safe(self.message).replace("\\", "\\\\").replace("\n", "\\n")
        return f"{status} {text}\n".encode()

    @classmethod
    def decode(cls, line: bytes) -> Outcome:
        status, space, text = line.decode(errors="replace").rstrip("\n").partition(" ")
        if not space or not (status.isascii() and status.isdigit()):
            raise ProtocolError(f"not a reply: {line[:200]!r}")
        return cls(int(status), _ESCAPED.sub(_unescape, text))


_ESCAPED = re.compile(r"\\(.)")


def _unescape(m: re.Match[str]) -> str:
    return "\n" if m.group(1) == "n" else m.group(1)


def read_line(conn: socket.socket) -> bytes | None:
    """One line from the other side; None when it closed the connection first."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data
