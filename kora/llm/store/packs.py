"""The call store's files: answers appended to a few pack files, not one new file each.

A run stores one answer a model call, 100,000 for a whole grid. A file of its own for each
cost the file system a new inode, a directory entry and a rename, each made while the
broker's event loop waited: on the 2-core VM of bench/README.md ("Where the broker's loop
stops") making those files was 30 % of the samples taken while the loop stood still. An
append to a file already open costs none of that.

Under the store's folder:

    packs/<n>.jsonl            answers, one entry a line (the bytes `CallCache.entry` makes)
    packs/<n>.rejected.jsonl   answers their caller turned down (kept apart, never served)

A process appends to one pack, held with an exclusive `flock` for as long as it lives, so
two writers never share a file; a pack nobody holds is taken by the next writer, so the
number of packs stays the number of writers that ran at once. Where the file system has no
`flock` (some cluster mounts), a writer makes a pack named for its host and pid instead.
A writer first cuts a half line a killed writer left at the end, and cuts back a write that
failed (a full disk), so every line in a pack is whole.

A reader indexes the lines of every pack (key -> where) once, and on a miss reads what was
appended since, so an answer any process stored before the lookup is found.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import itertools
import os
import socket
import threading
import time
import weakref
from array import array
from bisect import bisect_left
from pathlib import Path

from kora.llm.store.files import open_file

PACKS = "packs"
ANSWERS = ".jsonl"
REJECTED = ".rejected.jsonl"
_LEAD = b'{"key":"'  # every entry begins with its key (`CallCache.entry` writes it first)
_KEY_END = len(_LEAD) + 64
_CHUNK = 1 << 22
_COARSE = 2.0  # seconds: a folder changed this lately is listed on every look
_FLAGS = getattr(os, "O_CLOEXEC", 0)
_write = os.write  # one name for the append, which a test can make fail as a full disk does


def _slot(key: str | bytes) -> int:
    """An index's key for a call-store key: its first 64 bits (the key is a SHA-256; a
    rare clash only makes a read find the other key's entry, which it checks and refuses)."""
    return int(key[:16], 16)


class Index:
    """Where each key's line is (its pack, offset and length), by the key's slot.

    A whole grid's store is 100,000 answers, each looked up by every process that asks for
    it. A dict of slot -> where held them in some 120 bytes each (the table and two ints):
    12 MB in the broker by the grid's end, the largest thing in it that grew with the
    grid. Here they are 24 bytes each, in sorted arrays of machine ints, split into 256
    buckets by the slot's first byte so an insert moves a few hundred entries at most.
    """

    def __init__(self) -> None:
        # slot, pack, offset, length
        self._buckets = [(array("Q"), array("I"), array("Q"), array("I")) for _ in range(256)]

    def get(self, slot: int) -> tuple[int, int, int] | None:
        slots, packs, offsets, lengths = self._buckets[slot >> 56]
        i = bisect_left(slots, slot)
        if i < len(slots) and slots[i] == slot:
            return packs[i], offsets[i], lengths[i]
        return None

    def put(self, slot: int, pack: int, offset: int, length: int) -> None:
        """The line of `slot` (a later line of the same key replaces the earlier)."""
        slots, packs, offsets, lengths = self._buckets[slot >> 56]
        i = bisect_left(slots, slot)
        if i < len(slots) and slots[i] == slot:
            packs[i], offsets[i], lengths[i] = pack, offset, length
            return
        slots.insert(i, slot)
        packs.insert(i, pack)
        offsets.insert(i, offset)
        lengths.insert(i, length)

    def __len__(self) -> int:
        return sum(len(b[0]) for b in self._buckets)


class Packs:
    """The packs of one store's folder, as one process reads and writes them."""

    def __init__(self, root: Path) -> None:
        self.folder = root / PACKS
        self._lock = threading.Lock()
        self._paths: list[Path] = []
        self._fds: list[int] = []
        self._scanned: list[int] = []  # bytes of each pack indexed (whole lines only)
        self._known: dict[str, int] = {}  # file name -> its number in the lists
        self._index = {False: Index(), True: Index()}  # by `rejected`
        self._writers: dict[bool, int] = {}  # rejected -> the pack this process writes
        self._listed: tuple[int, int] | None = None  # the folder when last listed
        self._stem, self._stem_pid = "", -1  # this process's packs: <stem>.jsonl, ...
        self._frozen: list[int] | None = None  # each pack's size when frozen (`freeze`)
        weakref.finalize(self, _close_all, self._fds)

    # reading

    def read(self, key: str, *, rejected: bool = False) -> bytes | None:
        """The entry of `key` as written, None when no pack holds it."""
        with self._lock:
            where = self._index[rejected].get(_slot(key))
            if where is None:
                self._refresh()
                where = self._index[rejected].get(_slot(key))
            if where is None:
                return None
            data = self._pread(*where)
        return data if data is not None and data[len(_LEAD) : _KEY_END] == key.encode() else None

    def _pread(self, pack: int, offset: int, length: int) -> bytes | None:
        try:
            return os.pread(self._fds[pack], length, offset)
        except OSError:
            return None

    def freeze(self) -> None:
        """Read the packs only as far as they are now: what is stored later stays unseen
        (the plan a run counts beside itself must not take the run's answers for stored)."""
        with contextlib.suppress(OSError):
            self._add_new(os.listdir(self.folder))
        self._frozen = [os.fstat(fd).st_size for fd in self._fds]

    def _refresh(self) -> None:
        """Index what every pack gained since the last look, new packs too. A run's broker
        looks on every call it makes: the folder is listed again only when it changed, or
        changed so lately that a file system keeping whole seconds might not show it."""
        try:
            seen = os.stat(self.folder)
        except OSError:
            return  # no pack yet
        stamp = (seen.st_ino, seen.st_mtime_ns)
        if self._frozen is None and (
            stamp != self._listed or time.time() - seen.st_mtime < _COARSE
        ):
            try:
                names = os.listdir(self.folder)
            except OSError:
                return
            self._listed = stamp
            self._add_new(names)
        own = set(self._writers.values()) if self._stem_pid == os.getpid() else set()
        for pack in range(len(self._fds)):
            if pack not in own:  # this process's own lines are indexed as it writes them
                self._scan(pack)

    def _add_new(self, names: list[str]) -> None:
        for name in names:
            if name not in self._known and name.endswith(ANSWERS):
                with contextlib.suppress(OSError):
                    self._add(name, os.open(self.folder / name, os.O_RDONLY | _FLAGS))

    def _add(self, name: str, fd: int) -> int:
        self._known[name] = len(self._fds)
        self._paths.append(self.folder / name)
        self._fds.append(fd)
        self._scanned.append(0)
        return len(self._fds) - 1

    def _scan(self, pack: int) -> None:
        fd, at = self._fds[pack], self._scanned[pack]
        rejected = self._paths[pack].name.endswith(REJECTED)
        index = self._index[rejected]
        try:
            end = os.fstat(fd).st_size if self._frozen is None else self._frozen[pack]
            while at < end:
                chunk = os.pread(fd, min(_CHUNK, end - at), at)
                last = chunk.rfind(b"\n")
                if last < 0:
                    if len(chunk) < _CHUNK:
                        break  # a line still being written: read it next time
                    chunk = os.pread(fd, end - at, at)  # one line longer than a chunk
                    last = chunk.rfind(b"\n")
                    if last < 0:
                        break
                start = 0
                while start <= last:
                    stop = chunk.index(b"\n", start)
                    if chunk.startswith(_LEAD, start) and stop - start >= _KEY_END:
                        key = chunk[start + len(_LEAD) : start + _KEY_END]
                        with contextlib.suppress(ValueError):
                            index.put(_slot(key), pack, at + start, stop - start)
                    start = stop + 1
                at += last + 1
        except OSError:
            pass
        self._scanned[pack] = at

    # writing

    def append(self, key: str, entry: bytes, *, rejected: bool = False) -> None:
        """Add `entry` (of `key`) to this process's pack; on an error (a full disk) the
        pack is as it was, and the error names the pack."""
        with self._lock:
            pack = self._writer(rejected)
            fd, start = self._fds[pack], self._scanned[pack]
            line = entry + b"\n"
            try:
                done = 0
                while done < len(line):
                    done += _write(fd, line[done:])
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
                raise OSError(exc.errno, exc.strerror or str(exc), str(self._paths[pack])) from None
            self._scanned[pack] = start + len(line)
            self._index[rejected].put(_slot(key), pack, start, len(entry))

    def _writer(self, rejected: bool) -> int:
        if self._stem_pid != os.getpid():  # the first write, or a forked child's
            self._writers.clear()
            self._stem, fd = self._take()
            self._stem_pid = os.getpid()
            self._install(False, fd)
        if rejected not in self._writers:
            self._install(True, _open_append(self.folder / f"{self._stem}{REJECTED}"))
        return self._writers[rejected]

    def _install(self, rejected: bool, fd: int) -> None:
        """`fd`, this process's pack of that kind, written from now on."""
        name = self._stem + (REJECTED if rejected else ANSWERS)
        _cut_half_line(fd)
        pack = self._known.get(name)
        if pack is None:
            pack = self._add(name, fd)
        else:  # read before, written by this process from now on
            _close_fd(self._fds[pack])
            self._fds[pack] = fd
        self._scan(pack)  # what the pack held before this writer, all of it indexed
        self._writers[rejected] = pack

    def _take(self) -> tuple[str, int]:
        """The stem of a pack no other writer holds, and its answers' file, opened and
        locked by this process (the lock lasts while this file stays open)."""
        for n in itertools.count():
            fd = _open_append(self.folder / f"{n}{ANSWERS}")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            except OSError as exc:  # no flock here: a name only this process uses
                os.close(fd)
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    raise
                stem = f"{socket.gethostname()}-{os.getpid()}"
                return stem, _open_append(self.folder / f"{stem}{ANSWERS}")
            return str(n), fd
        raise AssertionError("unreachable")


_OPEN: weakref.WeakValueDictionary[str, Packs] = weakref.WeakValueDictionary()
_OPEN_LOCK = threading.Lock()


def packs_of(root: Path) -> Packs:
    """The packs of the store in `root`, one `Packs` in a process however many clients
    open that store (a run's broker makes a client for each job and model): one index, one
    pack written, its files opened once."""
    name = _real(os.path.abspath(root))
    with _OPEN_LOCK:
        found = _OPEN.get(name)
        if found is None:
            found = _OPEN[name] = Packs(Path(name))
        return found


@functools.lru_cache(maxsize=64)
def _real(path: str) -> str:
    """`path` with its links resolved, once a process: the broker opens the store for
    each job's clients, and each walk of the path stalled its loop (3 % of the stalled
    samples of a whole grid, bench/README.md)."""
    return os.path.realpath(path)


def _open_append(path: Path) -> int:
    return open_file(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)


def _cut_half_line(fd: int) -> None:
    """Cut what follows the last whole line: a killed writer's half-written entry."""
    end = size = os.fstat(fd).st_size
    while end > 0:
        start = max(0, end - _CHUNK)
        last = os.pread(fd, end - start, start).rfind(b"\n")
        if last >= 0:
            end = start + last + 1
            break
        end = start
    if end != size:
        os.ftruncate(fd, end)


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        _close_fd(fd)
