"""The CPU of one progress line at the end of a whole grid's run.

A whole v1 grid's run ends with about 3,000 job snapshots in `.kora/progress/<run>/`, one
a shard, nearly all of them closed. Snakemake's process prints a line every 5 s from them
(kora.run.jobs.progress.Monitor). This writes that many snapshots (a few still open) and
times a line as the monitor computes it, against reading every snapshot afresh (what
the run's last line does, and what every line did before the monitor kept what it had
read).

    python bench/progress_line.py
    python bench/progress_line.py --snapshots 6000 --open 20
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kora.run.jobs.progress import Snapshots

SNAPSHOT = {
    "stage": "conversations",
    "shard": "violence/7-9/curious",
    "items": 30,
    "items_done": 30,
    "items_failed": 0,
    "calls": 120,
    "cached": 3,
    "failures": 0,
    "waiting": 0,
    "last_retry": "",
    "closed": True,
}


def cpu_a_line(directory: Path, snapshots: Snapshots | None, lines: int) -> float:
    start = time.process_time()
    for _ in range(lines):
        (snapshots if snapshots is not None else Snapshots(directory)).totals()  # None: afresh
    return (time.process_time() - start) / lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshots", type=int, default=3000, help="closed snapshots")
    ap.add_argument("--open", type=int, default=10, help="snapshots of jobs still at work")
    ap.add_argument("--lines", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for i in range(args.snapshots):
            (d / f"{i}.json").write_bytes(orjson.dumps(SNAPSHOT))
        for i in range(args.open):
            (d / f"open-{i}.json").write_bytes(orjson.dumps({**SNAPSHOT, "closed": False}))
        kept = Snapshots(d)
        kept.totals()  # the lines before: each closed snapshot read once
        line = cpu_a_line(d, kept, args.lines)
        fresh = cpu_a_line(d, None, args.lines)
    print(
        f"{args.snapshots} closed and {args.open} open snapshots: a line {line * 1e3:.1f} ms "
        f"of CPU, reading all afresh {fresh * 1e3:.1f} ms ({line / fresh:.2f}x)"
    )


if __name__ == "__main__":
    main()
