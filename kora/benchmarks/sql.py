"""DuckDB plumbing every version's aggregation shares: the per-test files as a table, the
failed groups and the tests a chat service would not let run, how an occurrence sum is
written, and the groups' taxonomy order."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import duckdb

from kora.errors import InputError

if TYPE_CHECKING:
    from kora.benchmarks.taxonomy import Taxonomy

GROUP = ("riskCategoryId", "riskId", "ageRange", "prompt")  # a score's and failed group's

BLOCKED_SQL = """
SELECT riskCategoryId, riskId, ageRange, prompt, blocked, COUNT(*)
FROM tests WHERE error IS NOT NULL AND blocked IS NOT NULL
GROUP BY ALL ORDER BY blocked
"""


def whole(x: str | float | None) -> int | float:
    """An occurrence count sum: a whole number as an integer, as the reference holds it."""
    f = float(x or 0)
    return int(f) if f.is_integer() else f


# DuckDB's default largest JSON object, and the largest it can be told (a UINTEGER)
MIN_OBJECT_SIZE = 16 * 1024 * 1024
MAX_OBJECT_SIZE = 2**32 - 1


def object_size(paths: list[str]) -> int:
    """A `maximum_object_size` no record of these files can pass: the largest file's
    size. No answer's size (however large the replies in it) fails the aggregation."""
    largest = max((os.path.getsize(p) for p in paths), default=0)
    return min(max(MIN_OBJECT_SIZE, largest + 1), MAX_OBJECT_SIZE)


def open_tests(sql: str, paths: list[str], columns: dict[str, str]) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection whose table `tests` holds the per-test files (`sql` makes it,
    reading them with `read_json(?, columns = ?, maximum_object_size = ?)`)."""
    con = duckdb.connect()
    # one thread: each of DuckDB's threads reads the files with buffers of its own; the
    # whole v2 grid's results job peaked at 311-327 MB on two, 208-219 on one, its
    # `--forcerun results` 1.4 s slower (17.3 against 18.7 s)
    con.execute("SET threads = 1")
    try:
        con.execute(sql, [paths, columns, object_size(paths)])
    except (duckdb.Error, UnicodeDecodeError) as exc:
        con.close()
        why = _culprit(sql, paths, columns, exc)
        raise InputError(f"could not read per-test results: {why}") from None
    return con


def _culprit(sql: str, paths: list[str], columns: dict[str, str], exc: Exception) -> str:
    """What DuckDB could not read, naming the file: each read alone, the first that fails
    (its error may quote bytes that are not UTF-8, which then cannot be shown)."""
    culprit = paths[0] if len(paths) == 1 else None
    for p in paths if culprit is None else []:
        with duckdb.connect() as alone:
            try:
                alone.execute(sql, [[p], columns, object_size([p])])
            except (duckdb.Error, UnicodeDecodeError) as one:
                culprit, exc = p, one
                break
    text = str(exc) if isinstance(exc, duckdb.Error) else "a value that is not valid UTF-8"
    if culprit is None:  # each file reads alone: name them all (the first few)
        culprit = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return text if culprit in text else f"{culprit}: {text}"


def attach_blocked(failed: list[dict[str, Any]], blocked_rows: list[tuple[Any, ...]]) -> None:
    """Onto each failed group, the tests a chat service would not let run, by reason
    (`BLOCKED_SQL`'s rows)."""
    by_group = {(f["riskCategoryId"], f["riskId"], f["ageRange"], f["prompt"]): f for f in failed}
    for r in blocked_rows:
        by_group[tuple(r[:4])].setdefault("blocked", {})[str(r[4])] = int(r[5])


def reduce_tests(
    con: duckdb.DuckDBPyConnection, reduce_sql: str, failed_sql: str
) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]]]:
    """(the rows of `reduce_sql`, the failed groups of `failed_sql` with the tests a chat
    service would not let run) from a checked `open_tests` connection."""
    rows = con.execute(reduce_sql).fetchall()
    failed = [
        {**dict(zip(GROUP, r[:4], strict=True)), "failed": int(r[4]), "example": r[5]}
        for r in con.execute(failed_sql).fetchall()
    ]
    attach_blocked(failed, con.execute(BLOCKED_SQL).fetchall())
    return rows, failed


def in_order(groups: list[dict[str, Any]], taxonomy: Taxonomy | None) -> list[dict[str, Any]]:
    """Groups in taxonomy order (by their ids without one), the `default` prompt first."""

    def key(g: dict[str, Any]) -> tuple[Any, ...]:
        ids = (g["riskCategoryId"], g["riskId"], g["ageRange"])
        base = taxonomy.order_key(*ids) if taxonomy else (0, 0, 0)
        return (*base, *ids, 0 if g["prompt"] == "default" else 1)

    return sorted(groups, key=key)
