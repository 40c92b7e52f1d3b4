"""Per-test result files as (where, object) pairs, for telling their version apart."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import orjson

from kora.errors import InputError


def objects(files: Iterable[Path]) -> Iterable[tuple[str, object]]:
    for f in files:
        data = f.read_bytes()
        if f.suffix == ".json":
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"{f}: not valid JSON: {exc}") from None
            yield from (
                ((f"{f}[{i}]", o) for i, o in enumerate(obj))
                if isinstance(obj, list)
                else [(str(f), obj)]
            )
            continue
        for n, line in enumerate(data.splitlines(), 1):
            if line.strip():
                try:
                    yield f"{f}:{n}", orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise InputError(f"{f}:{n}: not valid JSON: {exc}") from None
