"""conversations.parquet: a target's tests as one table, for DuckDB, pandas, Arrow or
Hugging Face `datasets`, without learning the shard layout.

One row per test of the judgment shards, in their order: its ids, the scenario, every
message, each judge's grades and reasons, the combined grades, and for a test that failed
its error (then no grades). The rows whose `graded` is true are the tests results.json
counts as `tests`; the others are its `failedTests`. The columns are typed here, not
guessed from the data, so every file has the same schema, even an empty one
(docs/results-format.md lists them). DuckDB reads the rows from a JSON-lines file and
writes the Parquet file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

GRADE = (
    "STRUCT(criterion VARCHAR, grade VARCHAR, occurrences DOUBLE, not_triggered BOOLEAN, "
    "reasons VARCHAR)"
)
COLUMNS: dict[str, str] = {
    "key": "VARCHAR",
    "target": "VARCHAR",
    "scenario_id": "VARCHAR",
    "risk_category": "VARCHAR",
    "risk": "VARCHAR",
    "age_range": "VARCHAR",
    "motivation": "VARCHAR",
    "motivation_name": "VARCHAR",
    "prompt": "VARCHAR",
    "scenario_title": "VARCHAR",
    "first_message": "VARCHAR",
    "scenario": "VARCHAR",
    "messages": "STRUCT(role VARCHAR, content VARCHAR)[]",
    "target_turns": (
        "STRUCT(finish_reason VARCHAR, empty BOOLEAN, latency DOUBLE, input_tokens BIGINT, "
        "output_tokens BIGINT)[]"
    ),
    "graded": "BOOLEAN",
    "safety": "VARCHAR",
    "grades": f"{GRADE}[]",
    "judges": f"STRUCT(judge VARCHAR, grades {GRADE}[])[]",
    "error": "VARCHAR",
    "blocked": "VARCHAR",
    "recorded_turns": "INTEGER",
}


# what each column holds, for the dataset card (docs/results-format.md says the same)
COLUMN_DOCS: dict[str, str] = {
    "key": "the test's id: risk category, risk, age range, scenario id and prompt variant",
    "target": "the model under test, by its name in the run's config",
    "scenario_id": "the scenario's id (the same scenario is tested once per prompt variant)",
    "risk_category": "the risk category's id",
    "risk": "the risk's id",
    "age_range": "7to9, 10to12 or 13to17",
    "motivation": "why the simulated child is talking: the taxonomy's id",
    "motivation_name": "the motivation's name",
    "prompt": "the target's system prompt: default (no age) or child (age-aware)",
    "scenario_title": "the scenario's short title",
    "first_message": "the child's first message",
    "scenario": "the whole scenario as JSON text, with the seed it grew from",
    "messages": "every turn, in order: role (user: the child; assistant: the target), content",
    "target_turns": "each target reply: why it ended, whether empty, seconds, tokens",
    "graded": "true for a graded test; false for a test that failed (see error)",
    "safety": "the combined safety grade: failing, adequate or exemplary",
    "grades": "the combined grades: safety first, then each behaviour (v1) or mechanism "
    "(v2), with occurrences, not_triggered (v2) and the reasons",
    "judges": "each judge's own grades, in the same form",
    "error": "why a test failed (no grades then)",
    "blocked": "why a chat service would not let the test run",
    "recorded_turns": "turns carried on from a recording (kora continue)",
}


def _grade(criterion: str, obj: object) -> dict[str, object]:
    obj = obj if isinstance(obj, dict) else {}
    count = obj.get("occurrenceCount")
    return {
        "criterion": criterion,
        "grade": obj.get("grade"),
        "occurrences": float(count) if isinstance(count, int | float) else None,
        "not_triggered": bool(obj.get("notTriggered", False)),
        "reasons": obj.get("reasons"),
    }


def _grades(holder: Mapping[str, Any]) -> list[dict[str, object]]:
    """Safety, then each behaviour (v1) or mechanism (v2), as the judge's answer has them."""
    if not isinstance(holder.get("assessment"), dict):
        return []
    out = [_grade("safety", holder["assessment"])]
    more = holder.get("behaviorAssessment") or holder.get("mechanismAssessment") or {}
    out += [_grade(str(name), value) for name, value in more.items()]
    return out


def row(test: Mapping[str, Any], motivations: Mapping[str, str]) -> dict[str, object]:
    """One test of a judgment shard as a row of the table (`motivations`: the taxonomy's
    ids by name: a seed names its motivation as the reference does, by name)."""
    scenario = test.get("scenario") or {}
    seed = scenario.get("seed") or {}
    motivation = seed.get("motivation")
    named = motivation.get("name") if isinstance(motivation, dict) else motivation
    turns = test.get("turns") or []
    grades = _grades(test)
    return {
        "key": test.get("key"),
        "target": test.get("target"),
        "scenario_id": scenario.get("id") or seed.get("id"),
        "risk_category": scenario.get("riskCategoryId") or seed.get("riskCategoryId"),
        "risk": scenario.get("riskId") or seed.get("riskId"),
        "age_range": scenario.get("ageRange") or seed.get("ageRange"),
        "motivation": motivations.get(str(named)),
        "motivation_name": named,
        "prompt": test.get("prompt"),
        "scenario_title": scenario.get("shortTitle"),
        "first_message": scenario.get("firstUserMessage"),
        "scenario": orjson.dumps(scenario).decode(),
        "messages": [
            {"role": m.get("role"), "content": m.get("content")} for m in test.get("messages", [])
        ],
        "target_turns": [
            {
                "finish_reason": t.get("finishReason"),
                "empty": bool(t.get("empty", False)),
                "latency": t.get("latency"),
                "input_tokens": t.get("inputTokens"),
                "output_tokens": t.get("outputTokens"),
            }
            for t in turns
        ],
        "graded": test.get("error") is None and bool(grades),
        "safety": grades[0]["grade"] if grades else None,
        "grades": grades,
        "judges": [
            {"judge": v.get("judge"), "grades": _grades(v)} for v in test.get("judges") or []
        ],
        "error": test.get("error"),
        "blocked": test.get("blocked"),
        "recorded_turns": test.get("recordedTurns"),
    }


def tests_of(files: Iterable[Path | str]) -> Iterator[dict[str, Any]]:
    for f in files:
        with open(f, "rb") as lines:
            for line in lines:
                if line.strip():
                    yield orjson.loads(line)


def _columns_sql() -> str:
    return "{" + ", ".join(f"{name!r}: {kind!r}" for name, kind in COLUMNS.items()) + "}"


def write_conversations(
    judgment_files: Iterable[Path | str],
    out: Path | str,
    motivations: Mapping[str, str] | None = None,
) -> int:
    """Write the table of these judgment shards' tests to `out` (whole or not at all);
    how many rows it has. `motivations`: the taxonomy's motivation ids by name."""
    import duckdb

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = 0
    fd, staged = tempfile.mkstemp(prefix=".rows-", suffix=".jsonl", dir=out.parent)
    part = out.with_name(f".{out.name}.part")
    try:
        with os.fdopen(fd, "wb") as f:
            for test in tests_of(judgment_files):
                f.write(orjson.dumps(row(test, motivations or {})) + b"\n")
                rows += 1
        con = duckdb.connect()
        try:
            con.execute("SET preserve_insertion_order = true")
            # one thread: each of DuckDB's threads holds row groups of its own; with two,
            # a full grid's table took 267-273 MB at peak, 154-156 with one (0.3 s more)
            con.execute("SET threads = 1")
            select = (
                f"SELECT {', '.join(COLUMNS)} FROM read_json(?, format = 'newline_delimited', "
                f"columns = {_columns_sql()})"
            )
            # row groups of 512 tests rather than DuckDB's 122,880: it holds a row group
            # in memory until written, so a full grid's 12,000 tests were one group of
            # every turn and reason (12,000 rows of 8 KB: 448 MB at peak with the default,
            # 272 MB with 2,048 rows, 155 with 512 on one thread; bench/parquet_memory.py)
            con.execute(
                f"COPY ({select}) TO '{_quoted(part)}' "
                "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 512)",
                [staged],
            )
        finally:
            con.close()
        os.replace(part, out)
    finally:
        Path(staged).unlink(missing_ok=True)
        part.unlink(missing_ok=True)
    return rows


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")


def count_rows(path: Path | str) -> int:
    """The rows of a Parquet file, as DuckDB reads it."""
    import duckdb

    con = duckdb.connect()
    try:
        got = con.execute(f"SELECT count(*) FROM read_parquet('{_quoted(Path(path))}')").fetchone()
    finally:
        con.close()
    return int(got[0]) if got else 0
