"""The peak memory of writing conversations.parquet, by Parquet row group size.

    python bench/parquet_memory.py            # 12,000 rows of about 8 KB (a full v1 grid)
    python bench/parquet_memory.py --rows 1200

The table kora.analysis.parquet writes holds every turn and reason of a test: a full v1
grid's 12,000 tests are about 100 MB of JSON lines. DuckDB keeps a row group in memory
until it is written (each thread its own), and its default group (122,880 rows) takes
the whole grid. Each
setting is run three times in a fresh process (DuckDB's allocator keeps what it took),
reading the same synthetic file with the same COPY the project runs; the peak resident
memory of each process is printed, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

COPY = """
import resource, sys, duckdb
con = duckdb.connect()
con.execute("SET preserve_insertion_order = true")
con.execute("SET threads = " + sys.argv[4])
con.execute(
    "COPY (SELECT * FROM read_json(?, format = 'newline_delimited')) TO ? "
    "(FORMAT parquet, COMPRESSION zstd" + sys.argv[3] + ")",
    [sys.argv[1], sys.argv[2]],
)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def synthetic(path: Path, rows: int) -> None:
    rnd = random.Random(1)
    words = [
        "".join(rnd.choice(string.ascii_lowercase) for _ in range(rnd.randint(2, 9)))
        for _ in range(5000)
    ]
    with path.open("wb") as f:
        for i in range(rows):
            turns = [" ".join(rnd.choices(words, k=180)) for _ in range(6)]
            reasons = " ".join(rnd.choices(words, k=200))
            f.write(orjson.dumps({"id": i, "turns": turns, "reasons": reasons}) + b"\n")


def peak_mb(rows: Path, out: Path, option: str, threads: int) -> float:
    done = subprocess.run(
        [sys.executable, "-c", COPY, str(rows), str(out), option, str(threads)],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout.strip()) / 1024  # ru_maxrss is in KB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=12_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kora-bench-parquet-") as tmp:
        rows, out = Path(tmp) / "rows.jsonl", Path(tmp) / "out.parquet"
        synthetic(rows, args.rows)
        print(f"{args.rows:,} rows, {rows.stat().st_size / 1e6:.0f} MB of JSON lines")
        medians = {}
        settings = (
            ("DuckDB's default", "", 2),
            ("2,048 rows", ", ROW_GROUP_SIZE 2048", 2),
            ("512 rows on one thread (the project's)", ", ROW_GROUP_SIZE 512", 1),
        )
        for name, option, threads in settings:
            peaks = [peak_mb(rows, out, option, threads) for _ in range(args.runs)]
            medians[name] = statistics.median(peaks)
            shown = ", ".join(f"{p:.0f}" for p in peaks)
            print(f"  row groups of {name}: peak {shown} MB (median {medians[name]:.0f})")
        default = medians["DuckDB's default"]
        for name, _, _ in settings[1:]:
            print(f"  ratio, {name} to the default: {medians[name] / default:.2f}")


if __name__ == "__main__":
    main()
