"""Files the model layer writes (the call store, batch records): whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


# mkstemp makes 0600 files; results are meant to be shared like any other file
_FILE_MODE = _default_mode()


def write_atomic(path: Path | str, data: bytes, *, durable: bool = True) -> None:
    """Write to a temp file beside `path`, then rename: readers see old or new, never half.

    `durable=False` skips the fsync: the file still survives a killed process (it is in
    the kernel's page cache), only a power cut may leave it empty. For files whose reader
    treats a damaged one as missing (the call store's entries, progress snapshots): an
    fsync blocks the event loop that writes them, hundreds of times a second at a high
    provider limit."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # a full disk, say: nothing half-written is left, the file named
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
