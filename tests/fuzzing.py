"""Hypothesis strategies and the harness of the parser fuzzing (tests/test_fuzz_*.py).

Inputs are of three kinds, mixed: valid records with a few fields set to any JSON value
or removed (close to what a user's file holds, so the checks past parsing run too), any
JSON document, and lines that are no JSON at all. `fuzz(check, inputs, examples)` runs a
check on each; a check ends in success or in the project's own error (KoraError), which
must name the file (with its line, or the field): any other exception fails the test,
as would a traceback for a user.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kora.errors import KoraError

# The many-examples runs: 10,000 by default (the figure; the aggregation fuzz alone
# takes about 20 min of one core at that); CI sets KORA_FUZZ_EXAMPLES lower to stay in its
# time budget, and anyone can raise it for a longer hunt.
MANY = int(os.environ.get("KORA_FUZZ_EXAMPLES", "10000"))

Json = Any
Path_ = tuple[str | int, ...]

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN and infinities too: no JSON
    st.text(max_size=30),
    st.sampled_from(["", "default", "child", "7to9", "failing", "user", "assistant", "\x00"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


def paths(doc: Json, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every place in a document, the document itself first."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, (*prefix, i))


def _apply(doc: Json, ops: list[tuple[Path_, str, Json]]) -> Json:
    doc = copy.deepcopy(doc)
    for where, op, value in ops:
        if not where:
            doc = value
            continue
        parent = doc
        try:
            for part in where[:-1]:
                parent = parent[part]  # type: ignore[index]
            last = where[-1]
            if op == "del" and isinstance(parent, dict):
                parent.pop(last, None)
            elif op == "del" and isinstance(parent, list) and isinstance(last, int):
                del parent[last]
            else:
                parent[last] = value  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change moved it: this one has nothing to change
    return doc


def mutated(doc: Json) -> st.SearchStrategy[Json]:
    """`doc` with up to three places set to any value or removed (none, sometimes)."""
    ops = st.tuples(st.sampled_from(list(paths(doc))), st.sampled_from(["set", "del"]), VALUES)
    return st.lists(ops, max_size=3).map(lambda o: _apply(doc, o))


def encoded(docs: st.SearchStrategy[Json]) -> st.SearchStrategy[bytes]:
    """A document as a line of JSON (ASCII-escaped or not; NaN as Python writes it)."""
    return st.builds(
        lambda d, a: json.dumps(d, ensure_ascii=a).encode("utf-8", "surrogatepass"),
        docs,
        st.booleans(),
    )


def lines(valid: list[Json]) -> st.SearchStrategy[bytes]:
    """One line of a JSONL file: mostly near-valid records, or anything."""
    line = st.one_of(
        *(encoded(mutated(v)) for v in valid),
        *(encoded(mutated(v)) for v in valid),
        encoded(VALUES),
        st.binary(max_size=40).filter(lambda b: b"\n" not in b),
        st.sampled_from([b"", b" ", b"{", b"[]", b"null", b'"x"', b"\xff\xfe"]),
    )
    return line


def jsonl(valid: list[Json], max_lines: int = 4) -> st.SearchStrategy[bytes]:
    return st.lists(lines(valid), min_size=0, max_size=max_lines).map(
        lambda ls: b"\n".join(ls) + b"\n"
    )


def snapshot(root: Path) -> dict[str, str]:
    """Every file under `root` with its content's hash."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def names_its_input(message: str, *names: str) -> bool:
    """An error names the file it is about (and, within it, the line or the field)."""
    return any(n and n in message for n in names)


def fuzz(check: Callable[..., None], examples: int, **inputs: st.SearchStrategy[Any]) -> None:
    """`check(**drawn)` for `examples` drawn inputs; it raises only to fail the test."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(**inputs)
    def run(**drawn: Any) -> None:
        check(**drawn)

    run()


def expect_own_error(fn: Callable[[], Any], *names: str) -> KoraError | None:
    """None when `fn` succeeds; its KoraError (which must name one of `names`) when not.
    Any other exception propagates: a traceback a user would see."""
    try:
        fn()
    except KoraError as exc:
        assert names_its_input(str(exc), *names), f"{exc} (expected one of {names})"
        return exc
    return None
