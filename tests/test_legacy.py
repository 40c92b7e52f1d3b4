"""Risk folders an older version wrote: stamped once, dated back when a cell has work left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kora.benchmarks.layout import status_of
from kora.benchmarks.outcomes import Message
from kora.run.legacy import LONG_AGO, STAMP, take_over
from kora.run.shards import write_records, write_status

PLACES = ["7to9/m1", "13to17/m1"]


def cell(folder: Path, place: str, *, failed: int = 0) -> Path:
    path = folder / f"{place}.jsonl"
    records = [Message(role="user", content="hello")]
    status = {"stage": "seeds", "items": 1, "done": 1 - failed, "failed": failed}
    write_status(path, status, {path.name: write_records(path, records)})
    return path


def folder_of_cells(root: Path, risk: str, *, failed: int = 0) -> Path:
    folder = root / "seeds" / risk
    for place in PLACES:
        cell(folder, place, failed=failed if place == PLACES[0] else 0)
    return folder


def seeds_job(root: Path) -> list[tuple[str, str]]:
    """The seeds stage's risk folders and its jobs' logs."""
    return [(str(root / "seeds" / "{risk}"), str(root / "logs" / "seeds" / "{risk}.log"))]


def stamp_time(folder: Path) -> float:
    return (folder / STAMP).stat().st_mtime


@pytest.mark.timeout(30)
def test_a_folder_with_failed_items_is_dated_back_and_a_finished_one_keeps_its_date(
    tmp_path: Path,
) -> None:
    done = folder_of_cells(tmp_path, "done")
    os.utime(done, (1_700_000_000, 1_700_000_000))
    failed = folder_of_cells(tmp_path, "failed", failed=1)
    jobs = [(str(tmp_path / "seeds" / "{risk}"), str(tmp_path / "logs" / "{risk}.log"))]
    assert take_over(jobs, PLACES) == [failed]
    assert stamp_time(failed) == LONG_AGO  # older than its inputs: its job runs again
    assert stamp_time(done) == 1_700_000_000  # Snakemake sees the date it saw before
    # once: a folder with a stamp is Snakemake's, whatever it holds
    assert take_over(jobs, PLACES) == []


@pytest.mark.timeout(30)
@pytest.mark.parametrize("loss", ["shard", "status", "cell"])
def test_a_folder_with_a_file_missing_is_dated_back(tmp_path: Path, loss: str) -> None:
    folder = folder_of_cells(tmp_path, "r")
    shard = folder / f"{PLACES[1]}.jsonl"
    if loss in ("shard", "cell"):
        shard.unlink()
    if loss in ("status", "cell"):
        Path(status_of(shard)).unlink()
    assert take_over(seeds_job(tmp_path), PLACES) == [folder]
    assert stamp_time(folder) == LONG_AGO


@pytest.mark.timeout(30)
def test_folders_a_job_of_this_version_made_are_left_alone(tmp_path: Path) -> None:
    folder = folder_of_cells(tmp_path, "r", failed=1)
    (folder / STAMP).touch()
    os.utime(folder / STAMP, (1_800_000_000, 1_800_000_000))
    assert take_over(seeds_job(tmp_path), PLACES) == []
    assert stamp_time(folder) == 1_800_000_000


@pytest.mark.timeout(30)
def test_a_folder_a_stopped_job_of_this_version_left_is_left_to_snakemake(
    tmp_path: Path,
) -> None:
    """No stamp (the job did not end) but its job's one log, which an older version never
    wrote: Snakemake makes it again as incomplete, and the run says nothing of versions."""
    folder = tmp_path / "t1" / "conversations" / "r"
    cell(folder, PLACES[0], failed=1)
    log = tmp_path / "logs" / "t1" / "r.log"
    log.parent.mkdir(parents=True)
    log.write_text("")
    jobs = [
        (
            str(tmp_path / "{target}" / "conversations" / "{risk}"),
            str(tmp_path / "logs" / "{target}" / "{risk}.log"),
        )
    ]
    assert take_over(jobs, PLACES) == []
    assert not (folder / STAMP).exists()
    log.unlink()  # the older version's: its cells' logs only
    assert take_over(jobs, PLACES) == [folder]
