"""Shared test helpers: where the reference data and the repository live, and a KORA v2
config whose every role is the mock model."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kora import benchmarks

REPO = Path(__file__).resolve().parents[1]
UPSTREAM = REPO.parent / "shared" / "upstream"


def under_ci() -> bool:
    """CI sets CI=1: there, a missing prerequisite fails a test instead of skipping it."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def upstream(name: str) -> Path:
    """A reference file; a test that needs one is skipped without it, except under CI."""
    path = UPSTREAM / name
    if not path.exists():
        message = f"reference data {path} not available"
        if under_ci():
            pytest.fail(f"{message}; CI is set, so the test may not be skipped")
        pytest.skip(message)
    return path


def copy_workflow(dest: Path) -> Path:
    """A runnable copy of the workflow (Snakefile, rules, scripts, taxonomy) in `dest`."""
    for name in ("Snakefile", "config.yaml"):
        shutil.copy(REPO / name, dest / name)
    for d in ("rules", "scripts", "envs", "profiles"):
        shutil.copytree(REPO / d, dest / d)
    shutil.copytree(REPO / "data" / "taxonomy", dest / "data" / "taxonomy")
    return dest


# KORA v2's mechanisms in their canonical order, as its benchmark reads them
MECHANISMS = benchmarks.get("v2").criteria

# a KORA v2 config, every role the offline mock, with no grid: a test adds the grid it needs
V2_MOCK: dict[str, Any] = {
    "benchmark": "v2",
    "models": {"mock": {"provider": "mock"}},
    "seed_model": "mock",
    "expand_model": "mock",
    "user_model": "mock",
    "judges": ["mock"],
    "targets": {"t": {"model": "mock"}},
}


def record_truncations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length each `os.ftruncate` of the test cuts a file to, in order (the files are
    still cut)."""
    cut_to: list[int] = []
    real = os.ftruncate

    def ftruncate(fd: int, length: int) -> None:
        cut_to.append(length)
        real(fd, length)

    monkeypatch.setattr(os, "ftruncate", ftruncate)
    return cut_to
