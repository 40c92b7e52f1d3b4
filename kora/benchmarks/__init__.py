"""The versions of KORA: `get(name)` gives the one a run measures; `of_tests` and
`of_results` tell which version made per-test files or a results.json.

Nothing outside this package compares version names: it asks the version it was given.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from kora.errors import InputError

if TYPE_CHECKING:
    from kora.benchmarks.base import Benchmark

# a version's name -> the module whose BENCHMARK it is; a new version is one more line
VERSIONS = {"v1": "kora.benchmarks.v1.benchmark", "v2": "kora.benchmarks.v2.benchmark"}
DEFAULT = "v1"


@cache
def get(name: str) -> Benchmark:
    try:
        module = VERSIONS[name]
    except KeyError:
        raise InputError(
            f"unknown benchmark {name!r} (expected one of {', '.join(VERSIONS)})"
        ) from None
    found: Benchmark = importlib.import_module(module).BENCHMARK
    return found


def of_results(doc: Mapping[str, object]) -> Benchmark:
    """The version of a results.json or summary.json (v1's carry no stamp)."""
    return get(str(doc.get("benchmark", DEFAULT)))


def of_test(test: Mapping[str, object]) -> Benchmark:
    """The version of one graded per-test result."""
    for name in VERSIONS:
        if name != DEFAULT and get(name).recognises(test):
            return get(name)
    return get(DEFAULT)


def of_tests(tests: Iterable[object]) -> Benchmark:
    """The version of per-test results: the first graded one decides."""
    for test in tests:
        if isinstance(test, Mapping) and not test.get("error"):
            return of_test(test)
    return get(DEFAULT)


def of_files(files: Iterable[Path]) -> Benchmark:
    """The version of per-test result files (the project's JSONL or reference JSON)."""
    from kora.benchmarks.detect import objects

    return of_tests(obj for _, obj in objects(files))


def check_same(found: Benchmark, expected: Benchmark, what: str) -> None:
    """Refuse to mix versions: `what` (a folder, a file) was made by `found`."""
    if found is not expected:
        raise InputError(
            f"{what} holds {found.describe()} results, but this run's config is "
            f"{expected.describe()} (benchmark: {expected.name}); use a config with "
            f"`benchmark: {found.name}` for it, or a folder of {expected.describe()} results"
        )
