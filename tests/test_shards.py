"""Shard files and their status: damage is detected, named, and leads to a rebuild."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kora.benchmarks.layout import status_of
from kora.benchmarks.outcomes import Message
from kora.run.jobs.shards import (
    DamagedShardError,
    check,
    damage,
    missing_token,
    read_shard,
    retry_token,
    write_records,
    write_status,
)


def shard(tmp_path: Path, n: int = 3) -> Path:
    path = tmp_path / "risk" / "7to9" / "m.jsonl"
    records = [Message(role="user", content=f"hello {i}") for i in range(n)]
    write_status(path, {"stage": "test", "items": n}, {path.name: write_records(path, records)})
    return path


def test_a_whole_shard_reads_back(tmp_path: Path) -> None:
    path = shard(tmp_path)
    assert [m.content for m in read_shard(path, Message)] == ["hello 0", "hello 1", "hello 2"]
    assert damage(path) is None
    assert retry_token(path) == ""


def test_an_edit_of_the_same_size_is_caught_when_read(tmp_path: Path) -> None:
    path = shard(tmp_path)
    path.write_bytes(path.read_bytes().replace(b"hello 1", b"HELLO 1"))
    with pytest.raises(DamagedShardError, match=str(path)):
        read_shard(path, Message)


@pytest.mark.parametrize("harm", ["truncate", "drop-status", "garble-status"])
def test_damage_gives_a_fresh_retry_token_once(tmp_path: Path, harm: str) -> None:
    path = shard(tmp_path)
    if harm == "truncate":
        path.write_bytes(path.read_bytes()[:10])
    elif harm == "drop-status":
        Path(status_of(path)).unlink()
    else:
        Path(status_of(path)).write_text("{not json")
    assert damage(path) is not None
    token = retry_token(path)
    assert token  # a param value the last run did not have: Snakemake rebuilds the shard
    assert retry_token(path) == token  # and the same value until it is rebuilt
    with pytest.raises(DamagedShardError, match="run the same command again"):
        check(path)


def test_a_shard_whose_risk_folder_is_missing_is_not_damaged(tmp_path: Path) -> None:
    """Its job's one output (the risk's folder) is missing: Snakemake makes it anyway."""
    nothing = tmp_path / "risk" / "7to9" / "m.jsonl"
    assert damage(nothing) is None
    assert retry_token(nothing) == ""


def test_a_shard_missing_from_its_risk_folder_gets_a_fresh_retry_token_once(
    tmp_path: Path,
) -> None:
    """A job declares the risk's folder, not the shard: Snakemake sees the folder there and
    would make nothing, so the token of the missing shard's cell changes."""
    path = shard(tmp_path)
    path.unlink()
    assert damage(path) is not None
    token = retry_token(path)
    assert token
    assert retry_token(path) == token
    other = tmp_path / "risk" / "13to17" / "m.jsonl"  # a cell the folder never held
    assert retry_token(other) and retry_token(other) != token


def test_a_gathering_job_gets_a_fresh_token_once_for_inputs_missing_under_its_output(
    tmp_path: Path,
) -> None:
    """results.json's `retry` param: the same until one of its shards goes missing while it
    exists; then a new one, kept while the same files are missing for the same output."""
    output, shards = tmp_path / "results.json", [str(shard(tmp_path))]
    assert missing_token(output, shards) == ""  # no output yet: Snakemake makes it anyway
    output.write_text("{}")
    assert missing_token(output, shards) == ""  # nothing missing
    Path(shards[0]).unlink()
    token = missing_token(output, shards)
    assert token and missing_token(output, shards) == token
    os.utime(output, ns=(0, 0))  # a new output, the same shard missing again
    assert missing_token(output, shards) not in ("", token)
    output.unlink()
    assert missing_token(output, shards)  # the marker's last token, kept


def test_a_scenarios_rejected_file_shares_the_shard_status(tmp_path: Path) -> None:
    assert status_of("a/b.rejected.jsonl") == "a/b.status.json"
    assert status_of("a/b.jsonl") == "a/b.status.json"


def test_an_empty_file_written_after_its_status_is_damage(tmp_path: Path) -> None:
    """Nothing of this version writes a shard after its status: an empty file that was is
    not what its job left (a scenarios shard's `.rejected.jsonl` emptied by hand)."""
    path = tmp_path / "risk" / "7to9" / "m.jsonl"
    empty = path.with_suffix(".rejected.jsonl")
    files = {path.name: write_records(path, []), empty.name: write_records(empty, [])}
    write_status(path, {"stage": "scenarios", "items": 0}, files)
    assert damage(empty) is None
    later = Path(status_of(path)).stat().st_mtime + 5
    os.utime(empty, (later, later))
    assert damage(empty) is not None
