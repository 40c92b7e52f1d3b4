"""A job's answer as it travels back from the broker (`Outcome`), and the one read of a
line both sides use. Only `json` and `socket`: the process that waits for a job's answer
(kora.run.waiter) imports this and nothing heavier, so that each job's script costs a bare
interpreter while the broker runs its job.
"""

from __future__ import annotations

import json
import socket

# a job's status when the run was stopped while it ran (128 + SIGINT, as a shell says it)
STOPPED = 130


class ProtocolError(Exception):
    """A message that is not what the other side must send."""


class Outcome:
    """A job's exit status and what it tells the user (its stderr): what the job's runner
    (kora.run.execute) returns, and the broker's answer on the wire. A plain class, not a
    dataclass: `dataclasses` alone would add a third to the waiter's memory."""

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
        return json.dumps({"status": self.status, "message": self.message}).encode() + b"\n"

    @classmethod
    def decode(cls, line: bytes) -> Outcome:
        try:
            obj = json.loads(line)
            return cls(int(obj["status"]), str(obj.get("message", "")))
        except (ValueError, KeyError, TypeError) as exc:
            raise ProtocolError(f"not a reply: {line[:200]!r}") from exc


def read_line(conn: socket.socket) -> bytes | None:
    """One line from the other side; None when it closed the connection first."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data
