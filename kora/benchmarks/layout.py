"""Where a run keeps each stage's files: the one definition of every path pattern.

The rules take their output patterns from here (with Snakemake's wildcards left in), the
jobs, the plan and the commands the same paths with the wildcards filled in. A
benchmark version has its own data, results and logs folders (`Benchmark.data_dir`, ...),
so the files of two versions never meet. Every layer above this one may import it (the
analysis too), and a job's script does: the standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kora.benchmarks.base import Benchmark

# Snakemake's wildcards of a grid cell and of a target
CELL = "{risk}/{age}/{motivation}"
TARGET = "{target}"

# a target's files (in its folder of the results folder), and the records of what a run
# takes as given: an import (in the scenarios' folder), recordings carried on
RESULTS = "results.json"
USAGE = "usage.json"
SUMMARY = "summary.json"
REPORT = "report.html"
MANIFEST = "manifest.json"
IMPORTED_MANIFEST = "IMPORTED.json"
RECORDED_MANIFEST = "RECORDED.json"
# beside a shard's records: its status file, and the scenarios validation turned down
STATUS = ".status.json"
REJECTED = ".rejected.jsonl"

# the workspace's own folder: the call store unless the config names another (the bill
# and batches beside it), each run's progress snapshots and stop notes, the shared limits
KORA_DIR = ".kora"
CACHE_DIR = f"{KORA_DIR}/cache"
# how many items of a cell a job works on at once, unless the config says
CONCURRENCY = 16


def status_of(path: Path | str) -> str:
    """The status file of a shard; a scenarios shard's `.rejected.jsonl` shares it."""
    return re.sub(rf"({re.escape(REJECTED)}|\.jsonl)$", STATUS, str(path))


def rejected_of(path: Path | str) -> str:
    return re.sub(r"\.jsonl$", REJECTED, str(path))


def progress_dir(workdir: Path, run_id: str) -> Path:
    return workdir / KORA_DIR / "progress" / run_id


def stops_dir(workdir: Path | str, run_id: str) -> Path:
    return Path(workdir) / KORA_DIR / "stops" / run_id


# A shard's place in its risk's folder. A stage's job declares the risk's folder as one
# `directory()` output (and its sources' folders as inputs, one log for the job): Snakemake
# keeps objects, checksums and a metadata record for every path a job declares, and a
# job per cell's files made that most of its memory and CPU on a whole grid
# (bench/README.md, "A risk's folder as one output").
PLACE = "{age}/{motivation}"
_SHARD_END = f"/{PLACE}.jsonl"
_LOG_END = f"/{PLACE}.log"


def risk_folder(shard: str) -> str:
    """The risk's folder of a shard pattern: "<...>/{risk}" of
    "<...>/{risk}/{age}/{motivation}.jsonl"."""
    if not shard.endswith(_SHARD_END):
        raise ValueError(f"not a shard pattern: {shard}")
    return shard.removesuffix(_SHARD_END)


def shard_in(folder: str, place: str) -> str:
    """A shard's records in its risk's folder; `place` is "<age>/<motivation>"."""
    return f"{folder}/{place}.jsonl"


def job_log(cell_log: str) -> str:
    """The one log of a risk's job, from the pattern of its cells' logs."""
    if not cell_log.endswith(_LOG_END):
        raise ValueError(f"not a cell's log pattern: {cell_log}")
    return cell_log.removesuffix(_LOG_END) + ".log"


def cell_log(job_log: str, place: str) -> str:
    """A cell's own log, in a folder beside its job's log (not declared: the job's is)."""
    return f"{job_log.removesuffix('.log')}/{place}.log"


def folder_of(shard: Path | str) -> Path:
    """The risk folder a shard lies in (its job's one output)."""
    return Path(shard).parent.parent


@dataclass(frozen=True)
class Layout:
    data: str
    results: str
    logs: str

    @classmethod
    def of(cls, benchmark: Benchmark) -> Layout:
        return cls(benchmark.data_dir, benchmark.results_dir, benchmark.logs_dir)

    # --- shards: `cell` is "<risk>/<age>/<motivation>" --------------------------------

    def seeds(self, cell: str = CELL) -> str:
        return f"{self.data}/seeds/{cell}.jsonl"

    def scenarios(self, cell: str = CELL) -> str:
        return f"{self.data}/scenarios/{cell}.jsonl"

    def conversations(self, target: str = TARGET, cell: str = CELL) -> str:
        return f"{self.results}/{target}/conversations/{cell}.jsonl"

    def recorded(self, target: str = TARGET, cell: str = CELL) -> str:
        """Recorded conversations a continued target carries on (`kora continue`)."""
        return f"{self.results}/{target}/recorded/{cell}.jsonl"

    def judgments(self, target: str = TARGET, cell: str = CELL) -> str:
        return f"{self.results}/{target}/judgments/{cell}.jsonl"

    def log(self, stage: str, *parts: str) -> str:
        return "/".join((self.logs, stage, *parts)) + ".log"

    # --- per target -------------------------------------------------------------------

    def target_dir(self, target: str = TARGET) -> str:
        return f"{self.results}/{target}"

    def results_json(self, target: str = TARGET) -> str:
        return f"{self.results}/{target}/{RESULTS}"

    def usage_json(self, target: str = TARGET) -> str:
        return f"{self.results}/{target}/{USAGE}"

    def report_html(self, target: str = TARGET) -> str:
        return f"{self.results}/{target}/{REPORT}"

    def summary_json(self, target: str = TARGET) -> str:
        return f"{self.results}/{target}/{SUMMARY}"

    def manifest_json(self, target: str = TARGET) -> str:
        return f"{self.results}/{target}/{MANIFEST}"

    def conversations_parquet(self, target: str = TARGET) -> str:
        return f"{self.results}/{target}/conversations.parquet"

    def agreement_json(self, target: str = TARGET) -> str:
        return f"{self.results}/{target}/agreement.json"

    def annotations(self, target: str = TARGET) -> str:
        return f"{self.results}/{target}/annotations"

    def recorded_manifest(self, target: str = TARGET) -> Path:
        return Path(f"{self.results}/{target}/recorded/{RECORDED_MANIFEST}")

    # --- across targets ---------------------------------------------------------------

    def leaderboard_html(self) -> str:
        return f"{self.results}/leaderboard.html"

    def leaderboard_json(self) -> str:
        return f"{self.results}/leaderboard.json"

    @property
    def import_manifest(self) -> Path:
        """Written by `kora import-scenarios`: the scenarios are an import."""
        return Path(f"{self.data}/scenarios/{IMPORTED_MANIFEST}")
