"""One annotator's labels: a JSONL file under results/<target>/annotations/, one line per
answer, appended and flushed to disk at once (a killed server loses at most the answer
being typed); the last line for a test and criterion wins. A line cut by a crash is
skipped when read.

A line: {key, criterion, grade?, count?, notTriggered?, note?, queue, sample?, at}.
`queue` is where the conversation came from (`kora annotate --queue`): `estimate`, the
uniform sample, whose lines also name the sample (`sample`: its id in sample.json); or a
review queue (`judges`, `reference`, `risks`, or `review` for grades imported as such).
Only the current sample's `estimate` lines feed the corrected rates; every line counts
for agreement. A line naming no queue (written by hand) counts as `review`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from kora.analysis.records import known_criteria
from kora.benchmarks.schemas import GRADES
from kora.errors import InputError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
ESTIMATE = "estimate"
IMPORT_QUEUES = (ESTIMATE, "review")
FIELDS = ("grade", "count", "notTriggered", "note")


def label_file(folder: Path, annotator: str) -> Path:
    if not NAME.match(annotator):
        raise InputError(f"annotator {annotator!r}: use letters, digits, . _ - (up to 64)")
    return folder / f"{annotator}.jsonl"


def check(answer: Mapping[str, object]) -> dict[str, object]:
    """One answer as sent by the page: {key, criterion, grade?, count?, notTriggered?,
    note?}; `notTriggered`: a v2 mechanism whose precondition the conversation does not
    meet (graded neither way)."""
    crit = answer.get("criterion")
    if crit not in known_criteria():
        raise InputError(f"unknown criterion {crit!r}")
    if not isinstance(answer.get("key"), str):
        raise InputError("an answer needs the test's key")
    out: dict[str, object] = {"key": answer["key"], "criterion": crit}
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


def append(path: Path, answer: Mapping[str, object]) -> None:
    extend(path, [answer])


def extend(path: Path, answers: Sequence[Mapping[str, object]]) -> None:
    """Append answers, each stamped with the time, and flush them to disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    now = round(time.time(), 3)
    data = b"".join(orjson.dumps({**a, "at": now}) + b"\n" for a in answers)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        while data:
            data = data[os.write(fd, data) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def queue_of(line: Mapping[str, object]) -> str:
    """The queue a label line came from (`review` for a line that names none)."""
    q = line.get("queue")
    return q if isinstance(q, str) else "review"


def is_estimate(line: Mapping[str, object], sample: str | None) -> bool:
    """A grade of the uniform sample `sample` (its id), fit for the corrected rates."""
    return sample is not None and queue_of(line) == ESTIMATE and line.get("sample") == sample


def lines(path: Path) -> list[dict[str, Any]]:
    """Every whole, known answer of a label file, in order (a line cut by a crash and
    lines of criteria no version grades are left out)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in data.splitlines():
        try:
            a = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # the last line, cut by a crash
        if isinstance(a, dict) and a.get("criterion") in known_criteria():
            out.append(a)
    return out


def merge(answers: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{key: {criterion: {grade, count, notTriggered, note}}}: later answers over earlier."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for a in answers:
        slot = out.setdefault(str(a.get("key")), {}).setdefault(a["criterion"], {})
        slot.update({k: a[k] for k in FIELDS if k in a})
    return out


def read(path: Path, estimate: str | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """{key: {criterion: {grade, count, notTriggered, note}}}: every answer merged, later
    over earlier; with `estimate` (a sample id) only that sample's estimate lines."""
    found = lines(path)
    if estimate is not None:
        found = [a for a in found if is_estimate(a, estimate)]
    return merge(found)


def read_import(path: Path) -> list[tuple[str | None, dict[str, object]]]:
    """People's grades from a file (`kora annotate TARGET --import FILE`): JSONL, one answer
    a line as the label files hold them, {key, criterion, grade?, count?, notTriggered?,
    note?}, with `annotator` where the file holds several people's (else --annotator
    names them); blank lines skipped. Every line is checked first: an InputError names
    each bad line (up to 10) and nothing is read."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    out: list[tuple[str | None, dict[str, object]]] = []
    bad: list[str] = []
    for lineno, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
            if not isinstance(obj, dict):
                raise InputError("expected a JSON object")
            who = obj.get("annotator")
            if who is not None and not (isinstance(who, str) and NAME.match(who)):
                raise InputError(f"annotator {who!r}: use letters, digits, . _ - (up to 64)")
            out.append((who, check(obj)))
        except (orjson.JSONDecodeError, InputError) as exc:
            bad.append(f"{path}:{lineno}: {exc}")
    if bad:
        more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
        raise InputError("; ".join(bad[:10]) + more)
    if not out:
        raise InputError(f"{path}: no grades in it")
    return out
