"""Time the run-wide limiter's own cost per call, when it never has to wait.

    python bench/limiter_overhead.py               # 2,000 calls, 3 runs
    python bench/limiter_overhead.py --calls 20000

A limiter with a rate and concurrency far above what the loop can use (6,000,000 calls a
minute, 64 slots, adaptive) and its state in files shared between processes
(`state_dir`, as in a run), so a `slot()` is granted without waiting: what is timed is the
bookkeeping (a locked read and write of the rate file). Printed: microseconds per call
and the ratio to a 1 ms budget (the bound the test suite used to assert).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from kora.llm.limits import Limiter

BUDGET = 1e-3  # seconds a call


async def calls(limiter: Limiter, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        async with limiter.slot():
            pass
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kora-bench-limiter-") as tmp:
        for run in range(1, args.runs + 1):
            limiter = Limiter(6_000_000, 64, state_dir=Path(tmp), key=f"fast{run}", adaptive=True)
            per_call = asyncio.run(calls(limiter, args.calls)) / args.calls
            print(
                f"run {run}: {args.calls:,} calls, {per_call * 1e6:.0f} us a call; "
                f"{per_call / BUDGET:.1%} of the 1 ms budget"
            )


if __name__ == "__main__":
    main()
