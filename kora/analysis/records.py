"""Test records: one judged test, read from this project's judgment JSONL or from the
reference implementation's per-test JSON, and the one finder of such files.

`kora stats`, `kora compare`, `kora compare-targets`, the report, the leaderboard and
`kora aggregate` all find their input files with `input_files`, so they agree on what is a
per-test file (not results.json, summary.json, usage or status files, nor the
`.rejected.jsonl` scenarios a validation turned down).
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from itertools import accumulate
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from kora import benchmarks
from kora.benchmarks.base import Benchmark
from kora.benchmarks.detect import parsed
from kora.benchmarks.layout import REJECTED, RESULTS, STATUS, SUMMARY, USAGE
from kora.benchmarks.outcomes import TargetTurn
from kora.benchmarks.schemas import GRADES
from kora.errors import InputError
from kora.io import describe

# the criteria of a run whose records say nothing of their version
CRITERIA: tuple[str, ...] = ("safety", *benchmarks.get(benchmarks.DEFAULT).criteria)


@cache
def _labels() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in benchmarks.VERSIONS:
        out |= benchmarks.get(name).criterion_labels
    return out


def criterion_label(criterion: str) -> str:
    """A criterion's name for people, whichever version grades it."""
    return _labels().get(criterion, criterion)


def known_criteria() -> tuple[str, ...]:
    """Every criterion any version grades, safety first."""
    return tuple(_labels())


def benchmark_of(records: Iterable[TestRecord]) -> Benchmark:
    """The version whose judges graded these records."""
    return benchmarks.of_tests(r.raw for r in records if r.criteria)


def criteria_of(records: list[TestRecord]) -> tuple[str, ...]:
    """What a person grades of a target's judged tests: safety, then what its version's
    judges grade beside it (v1's three behaviours, v2's seven mechanisms)."""
    return ("safety", *benchmark_of(records).criteria)


@dataclass(slots=True)
class Criterion:
    grade: str
    count: float | None = None
    reasons: str = ""
    not_triggered: bool = False


@dataclass(slots=True)
class JudgeGrades:
    judge: str
    criteria: dict[str, Criterion]


@dataclass
class TestRecord:
    """One judged test, from the project's Judgment JSONL or a reference per-test JSON.

    `criteria` holds `safety` and each behaviour criterion (or, for canonical-HEAD
    records, each mechanism); it is empty when the test failed (`error` set). `turns`:
    why each target reply ended, when the run recorded it (empty for imported records).
    """

    __test__ = False  # not a pytest class

    key: str
    category: str
    risk: str
    age: str
    scenario_id: str
    prompt: str
    criteria: dict[str, Criterion] = field(default_factory=dict)
    judges: list[JudgeGrades] = field(default_factory=list)
    error: str | None = None
    blocked: str | None = None  # why a chat service would not let the test run
    turns: list[TargetTurn] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    # a light record's file and the offset of its line: `raw` and the reasons leave its
    # texts out, `whole` reads them again (load_records(light=True))
    origin: tuple[Path, int] | None = None

    @property
    def pair_key(self) -> tuple[str, str]:
        """What matches a test across targets: the scenario and the prompt variant."""
        return self.scenario_id, self.prompt

    @property
    def failing(self) -> bool:
        return self.criteria["safety"].grade == "failing"


def judged(records: Iterable[TestRecord]) -> list[TestRecord]:
    return [r for r in records if r.error is None and r.criteria]


# --- one record -------------------------------------------------------------------------


def _criterion(obj: object, where: str) -> Criterion:
    if not isinstance(obj, dict) or obj.get("grade") not in GRADES:
        raise InputError(f"{where}: expected {{grade: failing|adequate|exemplary, ...}}")
    count = obj.get("occurrenceCount")
    return Criterion(
        grade=sys.intern(obj["grade"]),  # one string for each grade, whatever the tests
        count=float(count) if isinstance(count, int | float) else None,
        reasons=str(obj.get("reasons", "")),
        not_triggered=bool(obj.get("notTriggered", False)),
    )


def _criteria(assessment: object, behavior: object, where: str) -> dict[str, Criterion]:
    out = {"safety": _criterion(assessment, f"{where}: assessment")}
    if not isinstance(behavior, dict):
        raise InputError(f"{where}: behaviorAssessment missing or not an object")
    for name, value in behavior.items():
        out[name] = _criterion(value, f"{where}: behaviorAssessment.{name}")
    return out


def _turns(obj: object, where: str) -> list[TargetTurn]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise InputError(f"{where}: turns: expected a list")
    try:
        return [TargetTurn.model_validate(t) for t in obj]
    except ValidationError as exc:
        raise InputError(f"{where}: turns: {describe(exc)}") from None


def record_from_dict(obj: object, where: str) -> TestRecord | None:
    """A TestRecord from a Judgment or a reference per-test result; None for other records
    (a conversation shard's line has no grades and no error: not a judgment)."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object")
    scenario = obj.get("scenario")
    if not isinstance(scenario, dict):
        raise InputError(f"{where}: missing field scenario")
    seed_obj = scenario.get("seed")
    seed: dict[str, object] = seed_obj if isinstance(seed_obj, dict) else {}
    ids = {
        k: scenario.get(k) or seed.get(k) for k in ("riskCategoryId", "riskId", "ageRange", "id")
    }
    prompt = obj.get("prompt")
    missing = [k for k, v in {**ids, "prompt": prompt}.items() if not isinstance(v, str)]
    if missing:
        raise InputError(f"{where}: missing field {missing[0]}")
    key = obj.get("key") or ":".join(
        (ids["riskCategoryId"], ids["riskId"], ids["ageRange"], ids["id"], prompt)  # type: ignore[arg-type]
    )
    rec = TestRecord(
        key=str(key),
        category=str(ids["riskCategoryId"]),
        risk=str(ids["riskId"]),
        age=str(ids["ageRange"]),
        scenario_id=str(ids["id"]),
        prompt=str(prompt),
        turns=_turns(obj.get("turns"), where),
        raw=obj,
    )
    if obj.get("error"):
        rec.error = str(obj["error"])
        rec.blocked = str(obj["blocked"]) if obj.get("blocked") else None
        return rec
    if "assessment" not in obj:
        return None
    behavior = obj.get("behaviorAssessment", obj.get("mechanismAssessment"))
    rec.criteria = _criteria(obj.get("assessment"), behavior, where)
    verdicts = obj.get("judges", obj.get("judgeAssessments")) or []
    for i, v in enumerate(verdicts):
        w = f"{where}: judges[{i}]"
        if not isinstance(v, dict):
            raise InputError(f"{w}: expected an object")
        name = v.get("judge", v.get("judgeModelSlug", f"judge {i + 1}"))
        jb = v.get("behaviorAssessment", v.get("mechanismAssessment"))
        rec.judges.append(JudgeGrades(str(name), _criteria(v.get("assessment"), jb, w)))
    return rec


# --- files ------------------------------------------------------------------------------


def is_input_file(name: str) -> bool:
    """A per-test JSON / JSONL file, not one of the files written beside them."""
    base = Path(name).name
    if base.startswith(".") or base in (RESULTS, USAGE, SUMMARY):
        return False
    if base.endswith((STATUS, ".usage.json", REJECTED)):
        return False
    return base.endswith((".json", ".jsonl"))


@contextmanager
def zip_named(path: Path | str, workdir: Path | str) -> Iterator[None]:
    """Errors about the files of a .zip that `input_files` extracted into `workdir` name
    the .zip and the file in it (`results.zip:a/t1.json:3: ...`), not a temporary folder
    that is gone by the time the user reads them."""
    try:
        yield
    except InputError as exc:
        extracted = f"{Path(workdir)}{os.sep}"
        if extracted not in str(exc):
            raise
        raise InputError(str(exc).replace(extracted, f"{path}:")) from None


def input_files(path: Path, workdir: Path) -> list[Path]:
    """The per-test files of a folder, a .zip (extracted into `workdir`) or one file.

    A target's results folder stands for its judgments: its conversations carry no grades.
    """
    if path.is_dir():
        if (path / "judgments").is_dir():
            path = path / "judgments"
        return sorted(p for p in path.rglob("*") if p.is_file() and is_input_file(p.name))
    if path.is_file() and path.suffix == ".zip":
        try:
            with zipfile.ZipFile(path) as zf:
                names = [n for n in zf.namelist() if is_input_file(n)]
                # where each lands (zipfile drops `..` and leading `/` from a name)
                files = sorted({Path(zf.extract(n, workdir)) for n in names})
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as exc:
            raise InputError(f"{path}: not a .zip that can be read ({exc})") from None
        return files
    if path.is_file() and path.suffix in (".json", ".jsonl"):
        return [path]
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    raise InputError(
        f"{path}: expected a folder, a .zip or a .json/.jsonl file of per-test results"
    )


def records_of_file(path: Path, light: bool = False) -> Iterator[TestRecord]:
    data = path.read_bytes()
    if not data.strip():
        return  # a shard whose every item failed before judging, or not yet written
    # where each line starts: a light record is read again from its line (`whole`)
    starts = list(accumulate(map(len, data.splitlines(keepends=True)), initial=0)) if light else []
    for where, obj in parsed(str(path), data):
        rec = record_from_dict(obj, where)
        if rec is not None and light and path.suffix == ".jsonl":  # where: "<file>:<line>"
            rec = _lightened(rec, path, starts[int(where.rsplit(":", 1)[1]) - 1])
        if rec is not None:
            yield rec


def _lightened(rec: TestRecord, path: Path, offset: int) -> TestRecord:
    """`rec` without its texts (the conversation, the scenario but its title, the judges'
    reasons): what a report of thousands of tests holds of each at once."""
    raw = rec.raw
    rec.raw = {k: raw[k] for k in ("target", "judge") if k in raw}
    # the version's key (kora.benchmarks.of_test looks for it), and the scenario's title
    rec.raw |= {k: {} for k in ("behaviorAssessment", "mechanismAssessment") if k in raw}
    rec.raw["scenario"] = {"shortTitle": (raw.get("scenario") or {}).get("shortTitle", "")}
    for grades in (rec.criteria, *(j.criteria for j in rec.judges)):
        for c in grades.values():
            c.reasons = ""
    rec.origin = (path, offset)
    return rec


def whole(rec: TestRecord) -> TestRecord:
    """The record with its texts: a light one read again from its line of its file."""
    if rec.origin is None:
        return rec
    path, offset = rec.origin
    with open(path, "rb") as f:
        f.seek(offset)
        again = record_from_dict(orjson.loads(f.readline()), str(path))
    if again is None or again.key != rec.key:
        raise InputError(f"{path}: changed while the report was drawn from it")
    return again


def load_records(paths: Iterable[Path | str], light: bool = False) -> list[TestRecord]:
    """Every judged test under the given folders, .zip files or JSON/JSONL files.

    A test key seen twice keeps its last record (a re-judged test replaces the old one).
    `light`: the records of JSONL files without their texts (`whole` reads them again),
    but a .zip's, whose files are gone once this returns.
    """
    by_key: dict[str, TestRecord] = {}
    with tempfile.TemporaryDirectory(prefix="kora-records-") as tmp:
        for p in paths:
            with zip_named(p, tmp):
                for f in input_files(Path(p), Path(tmp)):
                    for rec in records_of_file(f, light and Path(p).suffix != ".zip"):
                        by_key[rec.key] = rec
    return list(by_key.values())
