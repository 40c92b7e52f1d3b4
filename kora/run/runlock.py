"""One run at a time on a call store: a second run refuses to start, naming the first.

Two runs on one checkout (`--nolock` lets Snakemake start them) would each ask, and pay
for, the calls the other is asking: the store keeps an answer only once it is in. The
run's Snakemake process holds an exclusive lock (`flock`) on `<cache_dir>.lock`, beside
the store, from `onstart` until it ends; the file says which process holds it. The
kernel drops the lock when that process ends, however it ends (`kill -9` included), so
a lock is never stale. Jobs, the broker and the read-only commands (`kora plan`) take
no lock.

Why a lock per run rather than single-flight per call across processes: one lock
covers every way two runs overlap (batches in flight for hours, calls made ahead of
their jobs) at no cost per call, and a user told which run holds the store can wait for
it, or stop it; per-call locks would make the second run wait on the first call by call
all the same.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kora.errors import KoraError


class StoreBusy(KoraError):
    """Another run holds the call store."""


def lock_path(cache_dir: Path | str) -> Path:
    return Path(f"{Path(cache_dir).resolve()}.lock")


@dataclass
class RunLock:
    path: Path
    handle: IO[str] | None

    def release(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.truncate(0)
            handle.close()  # and the lock with it


def hold(cache_dir: Path | str, what: str = "a kora run") -> RunLock:
    """The store's lock, for this process; StoreBusy naming the holder when another
    process has it."""
    path = lock_path(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "a process that did not say which"
        handle.close()
        raise StoreBusy(
            f"another run is using the call store {Path(cache_dir)} ({holder}): two runs "
            "at once would pay for the same calls twice. Wait for it to end, or stop it; "
            f"its lock is {path}."
        ) from None
    handle.seek(0)
    handle.truncate(0)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    handle.write(f"{what}, pid {os.getpid()} on {socket.gethostname()}, since {started}\n")
    handle.flush()
    return RunLock(path, handle)


def busy(cache_dir: Path | str) -> str | None:
    """What a second run is told while another process holds the store's lock, naming
    it; None when none does (the lock is taken, and let go at once)."""
    try:
        hold(cache_dir, "a look").release()
    except StoreBusy as held:
        return str(held)
    return None
