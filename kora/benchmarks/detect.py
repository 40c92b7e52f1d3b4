"""Per-test result files as (where, object) pairs: for telling their version apart, for
their records (kora.analysis.records) and for the conversations an import takes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import orjson

from kora.errors import InputError


def objects(files: Iterable[Path]) -> Iterator[tuple[str, object]]:
    for f in files:
        yield from parsed(str(f), f.read_bytes())


def parsed(name: str, data: bytes) -> Iterator[tuple[str, object]]:
    """A .json file's object (each of its list's), else each non-blank line of a JSONL
    file; `name` is the file as errors name it."""
    if name.endswith(".json"):
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{name}: not valid JSON: {exc}") from None
        yield from (
            ((f"{name}[{i}]", o) for i, o in enumerate(obj))
            if isinstance(obj, list)
            else [(name, obj)]
        )
        return
    for n, line in enumerate(data.splitlines(), 1):
        if line.strip():
            try:
                yield f"{name}:{n}", orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"{name}:{n}: not valid JSON: {exc}") from None
