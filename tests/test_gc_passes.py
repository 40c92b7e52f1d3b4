"""The broker's garbage collector: its thresholds and its frozen start (its time on record
is the bench's: tests/test_loopwatch.py)."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

from kora.run.broker import gc_passes


@pytest.fixture
def restored() -> Iterator[None]:
    """This test process's collector as it was: tune() changes the process's thresholds."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


@pytest.mark.timeout(30)
def test_the_broker_collects_young_garbage_far_less_often(restored: None) -> None:
    gc_passes.tune()
    assert gc.get_threshold()[0] == gc_passes.YOUNG > 10 * 700


@pytest.mark.timeout(60)
def test_what_a_process_made_before_its_work_is_never_walked_again() -> None:
    """In a process of its own (a frozen object is never freed): after `freeze`, a full
    pass walks only what came after."""
    code = """
import gc
from kora.run.broker import gc_passes
before = [[i] for i in range(100_000)]  # lists: always tracked
gc_passes.freeze()
after = [[i] for i in range(10)]
tracked = len(gc.get_objects())
print(gc.get_freeze_count() >= 100_000, tracked < 1_000, any(o is after for o in gc.get_objects()))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True"]
