"""What one model call costs the broker's event loop when the loop was asleep before it.

At a low provider limit the broker has little to do: at 40 req/s a call's answer comes
some 25 ms after the one before, and the loop sleeps in between. On a virtual machine a
process that wakes after such a spell finds its caches cold (the host ran other work
meanwhile), and the same Python work costs more CPU. This bench measures that on the
real call path: a `ModelClient` of an Anthropic model (aiohttp, the limiter's shared
state files, the call store, the bill) against the loopback server of bench/workflow.py
in a process of its own, no limit and no latency, one distinct text call at a time:

- `busy`: `--in-flight` calls at once, so the loop always has the next answer to read;
- `gap N ms`: one call at a time, each after the loop slept N ms (the call's own wait
  for its answer comes on top: the loop sleeps then too).

Printed: the CPU of the loop's thread a call for each, and what the wake costs over the
busy figure. bench/workflow.py prints how many times the real run's loop slept and woke
a call (`the broker's event loop slept and woke`): the two together say how much of the
CPU a call at a low limit is the machine's price of waking, not work the call does.

    python bench/cold_wake.py
    python bench/cold_wake.py --calls 400 --gaps 0 3 25
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.workflow import loopback  # noqa: E402


async def _calls(url: str, folder: Path, args: argparse.Namespace) -> dict[str, float]:
    from kora.llm.base import ChatMessage
    from kora.llm.client import ModelClient
    from kora.llm.money.bill import BillWriter
    from kora.llm.providers.factories import Shared
    from kora.llm.settings.config import ModelConfig
    from kora.llm.shared_calls import SharedCalls
    from kora.llm.store.cache import CallCache

    config = ModelConfig(provider="anthropic", model="claude-bench", base_url=url)
    cache = CallCache(folder / "cache")
    client = ModelClient(
        "bench",
        config,
        Shared(
            store=cache,
            limits=folder / "limits",
            shared_calls=SharedCalls(),
            bill=BillWriter(folder / "bill", "bench"),
        ),
    )
    serial = itertools.count()

    async def one() -> None:
        # distinct, so that each is a paid call the store keeps, as a run's are
        text = f"message {next(serial)}: tell me about the weather where you are today"
        await client.text([ChatMessage(role="user", content=text)], stage="bench")

    out: dict[str, list[float]] = {}
    try:
        for _ in range(args.warmup):
            await one()
        for _ in range(args.repeats):
            # busy: the loop always has work; its CPU over the calls
            start = time.thread_time()
            todo = args.calls

            async def worker() -> None:
                nonlocal todo
                while todo > 0:
                    todo -= 1
                    await one()

            await asyncio.gather(*(worker() for _ in range(args.in_flight)))
            out.setdefault("busy", []).append((time.thread_time() - start) / args.calls)
            for gap in args.gaps:
                spent = 0.0
                for _ in range(args.calls):
                    await asyncio.sleep(gap / 1000)
                    start = time.thread_time()
                    await one()
                    spent += time.thread_time() - start
                out.setdefault(f"gap {gap:g} ms", []).append(spent / args.calls)
    finally:
        await client.provider.aclose()
    # the median over the repeats: the host's other work comes and goes
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=300, help="calls a measure")
    ap.add_argument("--gaps", type=float, nargs="+", default=[0.0, 1.0, 3.0, 25.0])
    ap.add_argument("--in-flight", type=int, default=20, help="calls at once when busy")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=100)
    args = ap.parse_args()
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-loopback")
    import uvloop

    with loopback(limit=1e6, latency=0.0) as server, tempfile.TemporaryDirectory() as tmp:
        got = uvloop.run(_calls(server.url, Path(tmp), args))
    busy = got["busy"]
    print(
        f"{args.calls} calls a measure, median of {args.repeats}; "
        "the CPU of the event loop's thread a call:"
    )
    for name, cpu in got.items():
        extra = "" if name == "busy" else f"  (+{(cpu - busy) * 1e6:.0f} us, {cpu / busy:.2f}x)"
        print(f"  {name:>12}: {cpu * 1e6:6.0f} us{extra}")
    print("reproduce: python bench/cold_wake.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
