"""The messages between a job's script and the run's broker (kora.run.broker.dispatch,
kora.run.broker.server): one line of JSON each way over a Unix socket, with a deadline on every
send. Standard library only: a job's script imports this, and its start must stay cheap.
The answer (kora.run.transport.reply) has a module of its own, lighter still.
"""

from __future__ import annotations

import contextlib
import json
import socket
from dataclasses import dataclass
from pathlib import Path

from kora.benchmarks.layout import stops_dir
from kora.run.transport.jobspec import JobSpec
from kora.run.transport.reply import ProtocolError

# connecting, sending and (for the prefetch hand-over) the acknowledgement: a broker that
# does not take a message in this time is treated as gone
SEND_TIMEOUT = 30.0


# the run's id, in the environment of every process of the run (its Snakemake's, its jobs')
RUN_ENV = "KORA_RUN_ID"


def stopping_path(workdir: Path | str, run: str) -> Path:
    """Where the run being stopped says so: a job's script that finds it runs nothing (its
    broker is gone because the run is stopping, not because it died), and the run's
    Snakemake tells a job a Ctrl-C ended from one that failed (kora.run.session)."""
    return stops_dir(workdir, run) / "stopping"


def say_stopping(workdir: Path | str, run: str | None) -> None:
    """Leave `stopping_path` (outside a run, or where it cannot be written: nothing)."""
    if run:
        marker = stopping_path(workdir, run)
        with contextlib.suppress(OSError):
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()


@dataclass(frozen=True)
class JobRequest:
    """Run this job and answer when it is done."""

    spec: JobSpec

    def encode(self) -> bytes:
        return json.dumps({"job": self.spec.as_json()}).encode() + b"\n"


@dataclass(frozen=True)
class PrefetchRequest:
    """Every shard job of the run, to make their calls ahead of them."""

    specs: list[JobSpec]

    def encode(self) -> bytes:
        return json.dumps({"prefetch": [s.as_json() for s in self.specs]}).encode() + b"\n"


def decode_request(line: bytes) -> JobRequest | PrefetchRequest:
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    try:
        if isinstance(obj, dict) and isinstance(obj.get("job"), dict):
            return JobRequest(JobSpec.from_json(obj["job"]))
        if isinstance(obj, dict) and isinstance(obj.get("prefetch"), list):
            return PrefetchRequest([JobSpec.from_json(s) for s in obj["prefetch"]])
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"a request that is no job: {exc}") from None
    raise ProtocolError("neither a job nor a prefetch request")


def connect(path: str, timeout: float = SEND_TIMEOUT) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        raise
    return conn
