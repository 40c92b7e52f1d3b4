"""File I/O at the edges: atomic writes and JSONL reading with line-numbered errors."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from kora.errors import InputError
from kora.llm.files import write_atomic

T = TypeVar("T", bound=BaseModel)


def dumps(obj: Any) -> bytes:
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    return orjson.dumps(obj)


def write_jsonl(path: Path | str, records: Iterable[Any]) -> None:
    write_atomic(path, b"".join(dumps(r) + b"\n" for r in records))


def write_json(path: Path | str, obj: Any, *, indent: bool = True) -> None:
    opt = orjson.OPT_INDENT_2 if indent else 0
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    write_atomic(path, orjson.dumps(obj, option=opt) + b"\n")


def iter_jsonl(path: Path | str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) for each non-blank line; a bad line names itself."""
    path = Path(path)
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise InputError(f"{path}: not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    with f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield lineno, orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"{path}:{lineno}: not valid JSON: {exc}") from None


def validate_all(model: type[T], items: Iterable[tuple[str, Any]]) -> list[T]:
    """Each `(where, value)` as a `model`; the first invalid one raises, naming `where`."""
    out = []
    for where, obj in items:
        try:
            out.append(model.model_validate(obj))
        except ValidationError as exc:
            raise InputError(f"{where}: {describe(exc)}") from None
    return out


def read_jsonl(path: Path | str, model: type[T]) -> list[T]:
    return validate_all(model, ((f"{path}:{n}", obj) for n, obj in iter_jsonl(path)))


def describe(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(record)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"field {loc}: {err['msg']}{more}"


__all__ = [
    "describe",
    "dumps",
    "iter_jsonl",
    "read_jsonl",
    "validate_all",
    "write_atomic",
    "write_json",
    "write_jsonl",
]
