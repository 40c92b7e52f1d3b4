"""File I/O at the edges: atomic writes, JSONL reading with line-numbered errors, and the
record of the files a command wrote where its user said (nothing else there is replaced)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from kora.errors import InputError
from kora.llm.store.files import write_atomic

T = TypeVar("T", bound=BaseModel)


def dumps(obj: object, option: int | None = None) -> bytes:
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    return orjson.dumps(obj, option=option)


def write_json(path: Path | str, obj: object) -> None:
    write_atomic(path, dumps(obj, orjson.OPT_INDENT_2) + b"\n")


def read_object(path: Path) -> dict[str, object] | None:
    """A JSON file's object; None when the file cannot be read or holds no object."""
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


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


# in a folder a command wrote files into at its user's word (`kora export --hf DIR`, `-o
# FILE`): the SHA-256 of each file it wrote there, as `sha256sum` writes them
WRITTEN = ".kora-written"


def sha256_file(path: Path | str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _written(folder: Path) -> dict[str, str]:
    try:
        lines = (folder / WRITTEN).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    return {name: digest for digest, _, name in (line.partition("  ") for line in lines)}


def _free(path: Path) -> bool:
    """Whether a command may write `path`: nothing is there, or what kora last wrote."""
    if not (path.is_file() or path.is_symlink()):
        return True
    return path.is_file() and _written(path.parent).get(path.name) == sha256_file(path)


def refuse_to_replace(paths: Iterable[Path], force: bool) -> None:
    """Before a command writes `paths`: each that holds a file kora did not write there (a
    user's file, or one of kora's changed since) is named, and nothing is written, unless
    `force`."""
    theirs = [str(p) for p in paths if not force and not _free(p)]
    if theirs:
        them = "it" if len(theirs) == 1 else "them"
        raise InputError(
            f"{', '.join(theirs)}: not written by kora (or changed since it was), so not "
            f"replaced, and nothing was written: name a new folder or file, or give --force "
            f"to replace {them}"
        )


def remember_written(paths: Iterable[Path]) -> None:
    """Record `paths` as written by kora, as they are now, in their folders' records."""
    for path in paths:
        record = _written(path.parent) | {path.name: sha256_file(path)}
        lines = "".join(f"{d}  {n}\n" for n, d in sorted(record.items()))
        write_atomic(path.parent / WRITTEN, lines.encode())


__all__ = [
    "describe",
    "dumps",
    "iter_jsonl",
    "read_jsonl",
    "refuse_to_replace",
    "remember_written",
    "sha256_file",
    "validate_all",
    "write_atomic",
    "write_json",
]
