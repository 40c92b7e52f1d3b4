"""Risk folders that a version before 28 November 2026 wrote, taken over once.

Before then, a stage's job declared each of its cells' files to Snakemake. Now it
declares its risk's folder (kora.run.groups), and Snakemake has no record of a folder
that an older version wrote. A job runs again for its cells' failed items, or for a
shard missing or damaged, because its `retry` param changed (kora.run.shards), and
Snakemake compares params only against a record it holds. Without this module, such a
folder's job would count as done for good, and the run's closing advice ("run the same
command again") would do nothing.

Snakemake dates a `directory()` output by the `.snakemake_timestamp` file it writes in
the folder when the job ends. A folder without that file, and without its job's one log
(`logs/<stage>/.../<risk>.log`, which this version's job opens as it starts, while the
older one wrote only its cells' logs), was written by the older version. A folder a
stopped run's job left has that log, and Snakemake makes it again as incomplete. Each
older version's folder gets the stamp once:

- if a cell of the folder has work left, the file is dated 2000-01-01, before the job's
  inputs, so the job runs again (its finished calls come from the call store);
- otherwise the file takes the folder's own time, so Snakemake sees the same date as
  before.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable
from pathlib import Path

import orjson

from kora.benchmarks.layout import shard_in, status_of
from kora.run.shards import damage

STAMP = ".snakemake_timestamp"  # where Snakemake keeps a directory() output's date
LONG_AGO = 946684800.0  # 2000-01-01: older than any input of a job
_WILDCARD = re.compile(r"\{[^}]+\}")


def work_left(folder: Path, places: Iterable[str]) -> bool:
    """Whether a cell of the risk's `folder` has work left: its status missing or
    unreadable, items that failed, or a file it lists missing or damaged."""
    for place in places:
        shard = Path(shard_in(str(folder), place))
        try:
            status = orjson.loads(Path(status_of(shard)).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return True
        if not isinstance(status, dict) or status.get("failed"):
            return True
        files = status.get("files")
        names = files if isinstance(files, dict) else {shard.name: None}
        if any(damage(shard.parent / name, status) is not None for name in names):
            return True
    return False


def _matcher(pattern: str) -> re.Pattern[str]:
    """A regex of a path pattern, its wildcards as named groups of one path part."""
    body, at = "", 0
    for wildcard in _WILDCARD.finditer(pattern):
        name = wildcard.group(0)[1:-1]
        body += re.escape(pattern[at : wildcard.start()]) + f"(?P<{name}>[^/]+)"
        at = wildcard.end()
    return re.compile(body + re.escape(pattern[at:]) + "$")


def take_over(jobs: Iterable[tuple[str, str]], places: list[str]) -> list[Path]:
    """Stamp every older version's folder: `jobs` holds each stage's risk-folder pattern
    and its job's log pattern (Snakemake's wildcards left in). Returns the folders whose
    jobs now run again."""
    again: list[Path] = []
    for pattern, log in jobs:
        matcher = _matcher(pattern)
        for name in sorted(glob.glob(_WILDCARD.sub("*", pattern))):
            folder = Path(name)
            stamp = folder / STAMP
            found = matcher.match(name)
            if not folder.is_dir() or stamp.exists() or found is None:
                continue
            if Path(log.format(**found.groupdict())).exists():
                continue  # this version's job: a stopped one, Snakemake's to make again
            when = LONG_AGO if work_left(folder, places) else folder.stat().st_mtime
            stamp.touch()
            os.utime(stamp, (when, when))
            if when == LONG_AGO:
                again.append(folder)
    return again
