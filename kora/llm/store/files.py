"""Files the model layer writes (the call store, batch records): whole or not at all."""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path


def write_atomic(path: Path | str, data: bytes) -> None:
    """Write to a temp file beside `path`, fsync it, then rename: readers see old or new,
    never half, and a power cut leaves one of the two."""
    path = Path(path)
    # a name no other writer uses (pid, thread and a counter), made with O_EXCL: cheaper
    # than tempfile's random names
    tmp = path.parent / f".{path.name}.{os.getpid()}.{threading.get_ident()}.{next(_serial)}.tmp"
    try:
        fd = _create(tmp)
    except FileExistsError:  # left by a killed process whose pid came round again
        tmp.unlink(missing_ok=True)
        fd = _create(tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # a full disk, say: nothing half-written is left, the file named
        tmp.unlink(missing_ok=True)
        if exc.filename is None or exc.filename == str(tmp):
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


_serial = itertools.count()


def _create(tmp: Path) -> int:
    """A new file, mode 0666 less the umask (as any file the process makes)."""
    return open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)


def open_file(path: Path, flags: int) -> int:
    """`os.open` with those flags, its folder made when missing."""
    flags |= getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, 0o666)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, flags, 0o666)


def write_over(path: Path | str, data: bytes) -> None:
    """Overwrite a small file where it is, without a temp file: for snapshots a reader
    polls and skips when it finds them half written (the progress line's). A run writes
    one a second for every shard in progress, and a new file (a temp file) costs the
    filesystem far more than writing into one that exists.

    The new bytes go over the old, and only then is the file cut to their length: cut to
    nothing first, it would give its block back, which a file system mounted with
    `discard` (many cloud disks) passes to the device while the caller waits; sampled in
    the kernel, the broker's loop waited there in 1.5-2.6 % of the samples of a full grid."""
    fd = open_file(Path(path), os.O_WRONLY | os.O_CREAT)
    try:
        replace_contents(fd, data)
    finally:
        os.close(fd)


def replace_contents(fd: int, data: bytes) -> None:
    """An open file's bytes replaced by `data`, written over the old ones, then the file
    cut to their length (never to nothing first: `write_over` says why)."""
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], done)
    os.ftruncate(fd, len(data))
