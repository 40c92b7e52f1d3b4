"""A shard's files: its records, its `.status.json`, its retry marker, and their checks.

Every stage job writes its JSONL records first, then the status file that describes them
(items, failures, usage, and the size, record count and SHA-256 of each file written). A
shard whose data no longer matches its status (cut, emptied or edited by hand, or written
by a job killed between the two files) is damaged:

- before a run, `retry_token` sees a size that differs from the status or a shard
  written after it (two stats and one small read a shard), or a shard missing from its
  risk's folder, and gives the shard a fresh retry token, so Snakemake rebuilds it (from
  the call store: nothing already paid is paid again);
- a job reading a shard checks all three figures and stops with an error naming the file
  (`DamagedShardError`) rather than crashing on a half line or silently using fewer items.

The retry marker (`shard_marker`) holds a token that changes whenever a shard must be made
again (it had failed items, or it is damaged); the token is the `retry` param of the
shard's rule, a function of the wildcards only, because Snakemake ignores params derived
from outputs.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel

from kora.benchmarks.layout import folder_of, status_of
from kora.errors import InputError
from kora.io import dumps as _dumps
from kora.io import read_jsonl, write_atomic, write_json

T = TypeVar("T", bound=BaseModel)


class DamagedShardError(InputError):
    """A shard's records do not match what its status file says was written."""


def retry_marker(output: Path | str) -> Path:
    """The marker of a gathering job's output (results.json), beside it."""
    return Path(f"{output}.retry")


def shard_marker(shard: Path | str) -> Path:
    """The marker of a shard: outside its risk's folder, in a `.retry` folder beside it.
    Snakemake empties the folder (its job's one output) before the job runs, and may
    ask for the token again after that: the marker must outlive it."""
    folder = folder_of(shard)
    return folder.parent / ".retry" / folder.name / f"{Path(shard).relative_to(folder)}.retry"


def write_records(path: Path | str, records: list[Any]) -> dict[str, Any]:
    """Write a JSONL shard atomically; what its status file records about it."""
    data = b"".join(_dumps(r) + b"\n" for r in records)
    write_atomic(path, data)
    return {"bytes": len(data), "records": len(records), "sha256": hashlib.sha256(data).hexdigest()}


def write_status(path: Path | str, status: dict[str, Any], files: dict[str, Any]) -> None:
    """The status file of a shard, after its data: `files` maps each data file's name to
    what `write_records` returned for it."""
    write_json(status_of(path), {**status, "files": files})


def _recorded(path: Path) -> dict[str, Any] | None:
    """What the status file says about `path`, or None when it says nothing usable."""
    try:
        status = orjson.loads(Path(status_of(path)).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    entry = status.get("files", {}).get(path.name) if isinstance(status, dict) else None
    return entry if isinstance(entry, dict) else None


def damage(path: Path | str) -> str | None:
    """A cheap check before a run: None when the shard's size is the one its status gives
    and it was not written after its status, or when its risk's folder is missing too
    (Snakemake makes it anyway); else a signature of the damage (its size and
    modification time, or "missing" and the folder's), the same until the file changes
    again. A job declares the risk's folder, not the shard (kora.run.workflow.risk_jobs): a shard
    gone from a folder that is there is Snakemake's to miss."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        try:
            return f"missing {folder_of(path).stat().st_mtime_ns}"
        except FileNotFoundError:
            return None
    entry = _recorded(path)
    if entry is not None and entry.get("bytes") == st.st_size and not _edited(path, st):
        return None
    return f"damaged {st.st_size} {st.st_mtime_ns}"


def _edited(path: Path, st: os.stat_result) -> bool:
    """Whether the shard was written after its status (its job writes the records first):
    an edit that kept the size. Snakemake sees only the risk's folder, not the shard's
    time (kora.run.workflow.risk_jobs)."""
    try:
        return st.st_mtime_ns > os.stat(status_of(path)).st_mtime_ns
    except FileNotFoundError:
        return True


def check(path: Path | str) -> None:
    """Raise DamagedShardError naming the file unless it is exactly what its job wrote."""
    path = Path(path)
    entry = _recorded(path)
    hint = "delete it and run the same command again: it is rebuilt from the call store"
    if entry is None:
        raise DamagedShardError(
            f"{path}: its status file {status_of(path)} is missing or unreadable, so the "
            f"shard cannot be trusted; {hint}"
        )
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != entry.get("bytes") or digest != entry.get("sha256"):
        lines = data.count(b"\n")
        raise DamagedShardError(
            f"{path}: damaged or edited: {len(data)} bytes and {lines} lines where its job "
            f"wrote {entry.get('bytes')} bytes and {entry.get('records')} records; {hint}"
        )


def read_shard(path: Path | str, model: type[T]) -> list[T]:
    """The records of a checked shard."""
    check(path)
    return read_jsonl(path, model)


def _renewed(marker: Path, found: str | None) -> str:
    """The marker's token, renewed first when `found` (what is wrong now; None: nothing)
    is not what it was last renewed for: the same token until that changes."""
    try:
        token, _, seen = marker.read_text().partition("\n")
    except FileNotFoundError:
        token, seen = "", ""
    if found is not None and seen.strip() != found:
        token = secrets.token_hex(8)
        write_atomic(marker, f"{token}\n{found}\n".encode())
    return token.strip()


def retry_token(output: Path | str) -> str:
    """The shard rule's `retry` param: the marker's token, renewed first when the shard
    looks damaged. Snakemake may ask more than once a run: the marker remembers which
    damage it was renewed for, so the token stays the same until the shard changes."""
    return _renewed(shard_marker(output), damage(output))


def missing_token(output: Path | str, inputs: list[str]) -> str:
    """The `retry` param of a rule that gathers many shards (results.json): renewed when
    one of its inputs is missing while the output exists.

    Snakemake rebuilds a missing intermediate file only for a job that must run anyway;
    a changed param makes the gathering job such a job, so every shard a failed or killed
    job left missing is made again by the same command. The marker remembers which files
    were missing for which version of the output, so the token is stable within a run.
    """
    try:
        version = Path(output).stat().st_mtime_ns
    except FileNotFoundError:  # no output: Snakemake makes it and everything it needs
        return _renewed(retry_marker(output), None)
    missing = [f for f in inputs if not Path(f).exists()]
    found = hashlib.sha256("\n".join([str(version), *missing]).encode()).hexdigest()[:16]
    return _renewed(retry_marker(output), found if missing else None)


def new_token(output: Path | str) -> str:
    token = secrets.token_hex(8)
    write_atomic(shard_marker(output), (token + "\n").encode())
    return token


def keep_token(output: Path | str, token: str) -> None:
    """After a job: keep the token the run started with (nothing to redo)."""
    marker = shard_marker(output)
    if token:
        write_atomic(marker, (token + "\n").encode())
    else:
        marker.unlink(missing_ok=True)
