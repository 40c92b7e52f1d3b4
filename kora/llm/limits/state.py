"""Where a limiter's state lives: in the process, or in a small file that every process
of the run (on every node sharing the filesystem) reads and updates under `fcntl.flock`.

A limit that each process kept for itself would be multiplied by the number of jobs
Snakemake runs at once, so the state is one file per model and kind under `state_dir`.
The work per update is a lock, a 100-byte read and a write: tens of microseconds.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")
S = TypeVar("S", bound="Packable")


class Packable(Protocol):
    def pack(self) -> bytes: ...


class MemoryState(Generic[S]):
    """A state shared by the tasks and threads of one process."""

    def __init__(self) -> None:
        self.state: S | None = None
        self.lock = threading.Lock()

    def update(self, fn: Callable[[S | None], tuple[S, T]]) -> T:
        with self.lock:
            self.state, out = fn(self.state)
            return out


class FileState(Generic[S]):
    """A state in a file, read and written under an exclusive flock; `unpack` reads the
    file's bytes (None: a new, foreign or damaged file, which starts afresh)."""

    def __init__(self, path: Path, unpack: Callable[[bytes], S | None]) -> None:
        self.path = path
        self.unpack = unpack
        self.pid = -1
        self.fd = -1
        # the bytes this opener wrote last and the state they hold: while no other process
        # has written since, the state is taken as it is rather than unpacked again (half
        # an update's CPU, and the broker updates four times a call)
        self._wrote = b""
        self._state: S | None = None

    def _open(self) -> int:
        if self.pid != os.getpid():  # never share an open file (and its locks) across fork
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self.pid = os.getpid()
        return self.fd

    def update(self, fn: Callable[[S | None], tuple[S, T]]) -> T:
        fd = self._open()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            raw = os.pread(fd, 256, 0)
            state = self._state if raw and raw == self._wrote else self.unpack(raw)
            # `fn` changes the state in place: should it fail halfway, the file still
            # holds the state before it, which the next update must read
            self._wrote, self._state = b"", None
            st, out = fn(state)
            packed = st.pack()
            os.pwrite(fd, packed, 0)
            self._wrote, self._state = packed, st
            return out
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


_registry: dict[tuple[str, ...], object] = {}
_registry_lock = threading.Lock()


def shared(key: tuple[str, ...], make: Callable[[], T]) -> T:
    """One object per key in this process: every limiter of a model uses the same state
    and slots."""
    with _registry_lock:
        obj = _registry.get(key)
        if obj is None:
            obj = _registry[key] = make()
        return obj  # type: ignore[return-value]
