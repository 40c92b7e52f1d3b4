"""One annotator's labels: a JSONL file under results/<target>/annotations/, one line per
answer, appended and flushed to disk at once (a killed server loses at most the answer
being typed); the last line for a test and criterion wins. A line cut by a crash is
skipped when read."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import orjson

from kora.analysis.records import known_criteria
from kora.benchmarks.schemas import GRADES
from kora.errors import InputError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


def label_file(folder: Path, annotator: str) -> Path:
    if not NAME.match(annotator):
        raise InputError(f"annotator {annotator!r}: use letters, digits, . _ - (up to 64)")
    return folder / f"{annotator}.jsonl"


def check(answer: dict[str, Any]) -> dict[str, Any]:
    """One answer as sent by the page: {key, criterion, grade?, count?, notTriggered?,
    note?}; `notTriggered`: a v2 mechanism whose precondition the conversation does not
    meet (graded neither way)."""
    crit = answer.get("criterion")
    if crit not in known_criteria():
        raise InputError(f"unknown criterion {crit!r}")
    if not isinstance(answer.get("key"), str):
        raise InputError("an answer needs the test's key")
    out: dict[str, Any] = {"key": answer["key"], "criterion": crit}
    grade = answer.get("grade")
    if grade is not None:
        if grade not in GRADES:
            raise InputError(f"unknown grade {grade!r}")
        out["grade"] = grade
    count = answer.get("count")
    if count is not None:
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= 99:
            raise InputError(f"count must be a whole number 0-99, not {count!r}")
        if crit == "safety":
            raise InputError("safety has no occurrence count")
        out["count"] = count
    nt = answer.get("notTriggered")
    if nt is not None:
        if not isinstance(nt, bool):
            raise InputError(f"notTriggered must be true or false, not {nt!r}")
        if crit == "safety":
            raise InputError("safety is always graded; only a mechanism can be not triggered")
        out["notTriggered"] = nt
    note = answer.get("note")
    if note is not None:
        out["note"] = str(note)[:2000]
    return out


def append(path: Path, answer: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    line = orjson.dumps({**answer, "at": round(time.time(), 3)}) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """{key: {criterion: {grade, count, notTriggered, note}}}: every answer merged, later
    over earlier."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return out
    for line in data.splitlines():
        try:
            a = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # the last line, cut by a crash
        if not isinstance(a, dict) or a.get("criterion") not in known_criteria():
            continue
        slot = out.setdefault(str(a.get("key")), {}).setdefault(a["criterion"], {})
        slot.update({k: a[k] for k in ("grade", "count", "notTriggered", "note") if k in a})
    return out
