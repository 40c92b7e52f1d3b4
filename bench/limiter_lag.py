"""The run-wide limiter on an event loop that other work keeps busy: the share of a limit
its requests reach, and what a server counting one-second windows would refuse.

    python bench/limiter_lag.py                  # 20 s at 300 req/s, 900 callers
    python bench/limiter_lag.py --seconds 60 --seed 2

A stand-in for the broker's loop of a four-target run (bench/full_grid.py --targets 4),
which is where the shared limit is lost: the real `Limiter` (its state in files, as in a
run) paces 900 callers that each wait `--latency` for an answer and ask again, so there
are always calls waiting; one more task holds the loop with blocking work, mostly 2 ms,
now and then 30 ms and 120 ms (times 0.5-1.5), 8 ms apart. A request counts as sent when
the next turn of the loop writes it (`kora.llm.limits.wrote`), as aiohttp's trace says.

Printed: the steady requests a second (bench.workflow's `steady_rate`: between the 10th
and 90th percentile of the write times) as a share of the limit, the busiest one-second
window of the writes (never above the paced rate, or the limiter is wrong), and how many
requests a server would refuse that counts a sliding one-second window at the limit and
whose own loop stalls now and then (20-90 ms, once in four seconds on average: it stamps
what came meanwhile at the stall's end), as the loopback servers of bench/workflow.py do
on this machine.

It is not the main job: a figure about the run comes from bench/full_grid.py. It is the
quick, repeatable place to try a change of the limiter's pacing first (a run of it takes
20 s, a four-target grid two minutes), and bench/README.md says where it and the real run
disagreed ("A faster VM, and a change of the limiter tried on a busy loop").
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import random
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.workflow import steady_rate  # noqa: E402
from kora.llm.limits import Limiter  # noqa: E402
from kora.llm.limits.turns import wrote  # noqa: E402
from tests.loopback import busiest_second  # noqa: E402


async def run(limit: float, seconds: float, callers: int, latency: float) -> list[float]:
    """The write times of every request of the run."""
    writes: list[float] = []
    stop = time.time() + seconds
    with tempfile.TemporaryDirectory(prefix="kora-bench-lag-") as tmp:
        limiter = Limiter(limit * 60, state_dir=Path(tmp), key="shared", adaptive=False)

        async def caller() -> None:
            while time.time() < stop:
                async with limiter.slot(traced=True):
                    await asyncio.sleep(0)  # written at the loop's next turn
                    now = time.time()
                    wrote(now)
                    writes.append(now)
                await asyncio.sleep(random.uniform(latency / 3, latency * 5 / 3))

        async def other_work() -> None:
            while time.time() < stop:
                r = random.random()
                hold = 0.002 if r < 0.8 else (0.03 if r < 0.97 else 0.12)
                time.sleep(hold * random.uniform(0.5, 1.5))  # the loop held up
                await asyncio.sleep(0.008)

        await asyncio.gather(other_work(), *(caller() for _ in range(callers)))
    return writes


def refused(writes: list[float], limit: float) -> int:
    """What a sliding-window server at `limit` refuses, its own loop stalling now and
    then (what arrives during a stall is stamped at its end)."""
    stalls: list[tuple[float, float]] = []
    t = writes[0]
    while t < writes[-1]:
        t += random.expovariate(0.25)
        stalls.append((t, t + random.uniform(0.02, 0.09)))
    starts = [a for a, _ in stalls]

    def stamp(w: float) -> float:
        i = bisect.bisect_right(starts, w) - 1
        if i >= 0 and w < stalls[i][1]:
            return stalls[i][1] + random.uniform(0, 0.002)
        return w + random.uniform(0, 0.001)

    window: deque[float] = deque()
    out = 0
    for s in sorted(stamp(w) for w in writes):
        while window and window[0] <= s - 1.0:
            window.popleft()
        if len(window) >= limit:
            out += 1
        else:
            window.append(s)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=float, default=300.0, help="requests a second")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--callers", type=int, default=900)
    ap.add_argument("--latency", type=float, default=1.5, help="mean seconds an answer takes")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    random.seed(args.seed)
    writes = asyncio.run(run(args.limit, args.seconds, args.callers, args.latency))
    share = steady_rate(writes, len(writes), len(writes)) / args.limit
    print(
        f"{len(writes):,} requests in {writes[-1] - writes[0]:.1f} s: {share:.3f} of the limit "
        f"(steady); busiest second {busiest_second(writes)}; a stalling server at the limit "
        f"would refuse {refused(writes, args.limit)}"
    )


if __name__ == "__main__":
    main()
