"""`kora aggregate`: per-test results under a folder or inside a .zip (this project's
judgment shards, or the reference's per-test JSON of either version) -> results.json
scores, by the version that made them."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from kora import benchmarks
from kora.analysis.records import input_files, zip_named
from kora.benchmarks.taxonomy import Taxonomy
from kora.errors import InputError


def aggregate_path(
    path: Path, taxonomy: Taxonomy | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(scores, failed groups) of the per-test files at `path`; the taxonomy orders the
    groups of a version whose reference keeps no order of its own."""
    with tempfile.TemporaryDirectory(prefix="kora-aggregate-") as tmp, zip_named(path, tmp):
        files = input_files(path, Path(tmp))
        if not files:
            raise InputError(f"{path}: no per-test result files found")
        bm = benchmarks.of_files(files)
        return bm.aggregate(files, None if bm.reference_order else taxonomy)
