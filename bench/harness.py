"""Processes for the benchmarks (and the cross-process limiter tests): a loopback provider
as a process's main loop, and one job of a run making calls through `ModelClient`.

Both are `multiprocessing` targets (spawn context): the parent passes queues and events,
and a spawned child imports this module as `bench.harness`, so the repository root must be
on `sys.path` (the bench scripts put it there; pytest's `pythonpath` does for the tests).
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

from tests.loopback import SERVERS


def shared_rate(path: Path) -> float | None:
    """The request rate a model's limiters share, in requests a second, from its state
    file (`<key>.rate` in the run's state folder; None: no rate is kept there)."""
    from kora.llm.limits import RateState

    st = RateState.unpack(path.read_bytes()) if path.exists() else None
    return st.rate if st is not None else None


def client_process(
    provider: str,
    base_url: str,
    state_dir: str,
    calls: int,
    concurrency: int,
    results: Any,
    *,
    name: str = "shared-model",
    requests_per_minute: float | None = None,
    max_concurrency: int | None = None,
    adaptive: bool | None = None,
    testing: bool = True,
    start_at: float = 0.0,
    deadline: float = math.inf,
    ready: Any = None,
    duration: float | None = None,
    prompt_chars: int = 0,
    limits: dict[str, float] | None = None,
) -> None:
    """One job of a run: `calls` calls (or until `deadline`) through ModelClient with
    `concurrency` tasks, sharing the limiter state in `state_dir`; puts a summary dict on
    the `results` queue. With a `ready` barrier, calls start when every party is ready and
    go on for `duration` seconds. `prompt_chars` pads each prompt (a judge's is a few
    thousand tokens); `limits` adds token limits to the model's config."""
    import os

    from kora.llm import retry
    from kora.llm.base import ChatMessage, Provider
    from kora.llm.client import ModelClient
    from kora.llm.limits import limiter_for
    from kora.llm.money.bill import BillWriter
    from kora.llm.providers.factories import Shared
    from kora.llm.settings.config import ModelConfig

    retry.set_testing(testing)
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-loopback")
    config = ModelConfig(
        provider=provider,  # type: ignore[arg-type]
        model="loopback-model",
        base_url=base_url,
        requests_per_minute=requests_per_minute,
        max_concurrency=max_concurrency,
        timeout=30,
        **(limits or {}),
    )
    limiter = limiter_for(name, config, Path(state_dir), adaptive=adaptive)
    bill = BillWriter(None, "bench")  # the answers' tokens, summed in memory
    client = ModelClient(name, config, Shared(bill=bill), limiter=limiter)
    provider_obj: Provider = client.provider
    done = 0
    errors: list[str] = []
    latencies: list[float] = []

    started = 0

    async def worker(wid: int) -> None:
        nonlocal done, started
        while started < calls and time.time() < deadline:
            started += 1
            t0 = time.time()
            try:
                prompt = f"w{os.getpid()}-{wid} " + "x" * prompt_chars
                await client.text([ChatMessage("user", prompt)], stage="bench")
            except Exception as exc:
                errors.append(str(exc)[:200])
            else:
                done += 1
                latencies.append(time.time() - t0)

    async def main() -> None:
        sessions = getattr(provider_obj, "_sessions", None)
        if sessions is not None:  # create the HTTP session before the clock starts
            sessions.get()
        nonlocal deadline
        if ready is not None:
            await asyncio.to_thread(ready.wait)
            if duration is not None:
                deadline = time.time() + duration
        if start_at > time.time():
            await asyncio.sleep(start_at - time.time())
        try:
            await asyncio.gather(*(worker(i) for i in range(concurrency)))
        finally:
            await provider_obj.aclose()

    asyncio.run(main())
    results.put(
        {
            "pid": os.getpid(),
            "done": done,
            "errors": errors,
            "latencies": latencies,
            "rate": shared_rate(Path(state_dir) / f"{limiter.key}.rate"),
            "input_tokens": sum(c.input_tokens for c in bill.sums.values()),
        }
    )


def server_process(
    kind: str, port_queue: Any, stats_queue: Any, stop_event: Any, **kw: Any
) -> None:
    """Run a loopback server as a process's main loop until `stop_event` is set, then put
    its statistics on `stats_queue`."""
    server = SERVERS[kind](record=False, **kw)
    server.start()
    port_queue.put(server.port)
    stop_event.wait()
    server.stop()
    with server.lock:
        stats_queue.put(
            {
                "statuses": dict(server.statuses),
                "accepted_times": list(server.accepted_times),
                "refused_times": list(server.refused_times),
                "max_in_flight": server.max_in_flight,
            }
        )
