"""Shared test helpers: where the reference data and the repository live."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
UPSTREAM = REPO.parent / "shared" / "upstream"


def upstream(name: str) -> Path:
    path = UPSTREAM / name
    if not path.exists():
        pytest.skip(f"reference data {path} not available")
    return path


def copy_workflow(dest: Path) -> Path:
    """A runnable copy of the workflow (Snakefile, rules, scripts, taxonomy) in `dest`."""
    for name in ("Snakefile", "config.yaml"):
        shutil.copy(REPO / name, dest / name)
    for d in ("rules", "scripts", "envs"):
        shutil.copytree(REPO / d, dest / d)
    shutil.copytree(REPO / "data" / "taxonomy", dest / "data" / "taxonomy")
    return dest
