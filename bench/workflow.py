"""The main job itself against a rate-limited provider: `snakemake --cores N results/...`.

A loopback Anthropic Messages API server (`--provider openai`: OpenAI's chat completions,
as the README's real run's target speaks) in its own process accepts at most `--limit`
requests per second (sliding one-second window; above it: 429 with Retry-After) and
answers each accepted request after `--latency` seconds with a schema-valid answer (seed
calls get 3 seeds, every validation passes). Every role and the target are models on that
server. The workflow (Snakefile, rules, scripts, taxonomy) is copied to a temp folder and
the real command runs there, from a cold start (no call store):

    snakemake --cores 10 results/bench-target/results.json --configfile bench.yaml

Printed: calls, the steady throughput (accepted requests a second between the 10th and
90th percentile of their arrival times) and its share of the limit, the share of requests
refused with 429, the wall time from the first request to results.json against the ideal
(`calls / limit + longest chain of dependent calls x latency`), the CPU-seconds of the
Snakemake process tree (jobs included) per call and per job, and the times the broker's
event loop slept and woke a call.

    python bench/workflow.py                       # 1 risk x 3 ages x 10 motivations
    python bench/workflow.py --motivations 3       # a smaller slice
    python bench/workflow.py --cores 10 --limit 40 --latency 1.5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import multiprocessing
import os
import random
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.procs import busy, watched_run  # noqa: E402

# seeds (1) -> expand (1) -> validate (1) -> first child message (1) -> 3 target replies
# and 2 child messages in turn (5) -> safety then behaviour judgment (2)
CHAIN = 11


def answer(rec: Any) -> dict[str, Any]:
    """A schema-valid structured answer to a forced tool call (validations pass)."""
    from kora.llm.providers.mock import _SchemaFaker

    if "response_format" in rec.body:  # OpenAI's chat completions: json_schema
        spec = rec.body["response_format"]["json_schema"]
        schema, name = spec["schema"], spec["name"]
    else:  # Anthropic's Messages: a forced tool call
        schema, name = rec.body["tools"][0]["input_schema"], rec.body["tools"][0]["name"]
    rng = random.Random(orjson.dumps(rec.body["messages"]))
    # seeds a seed call returns: 3 unless the full-grid rehearsal asks for what a real
    # model gives (the prompt's count)
    count = int(os.environ.get("KORA_BENCH_SEEDS_PER_CALL", "3"))
    value = _SchemaFaker(schema, rng, {"count": count}).value(schema)
    if name == "ScenarioValidation":
        value["verdict"] = "pass"
    return value  # type: ignore[no-any-return]


def serve(
    port_q: Any,
    stats_q: Any,
    stop: Any,
    limit: float,
    latency: float,
    itpm: float | None,
    provider: str = "anthropic",
) -> None:
    from tests.loopback import AnthropicServer, OpenAIServer

    base = OpenAIServer if provider == "openai" else AnthropicServer

    class Server(base):  # type: ignore[valid-type,misc]
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            self.admitted: list[tuple[float, int]] = []
            self.arrivals: list[float] = []

        def _over_rate(self, now: float) -> float | None:
            refused = super()._over_rate(now)
            self.arrivals.append(now)
            if refused is None:
                self.admitted.append((now, self._incoming))
            return refused

        def _next_answer(self, rec: Any, *, structured: bool, invalid: bool) -> Any:
            if not structured:
                # distinct per request, as a model's answers are: no two tests share a
                # transcript, so the call store cannot answer one test from another's
                n = len(rec.body.get("messages", []))
                tag = hashlib.sha256(orjson.dumps(rec.body)).hexdigest()[:10]
                return f"line {n} ({tag}): ok, but why would that be? tell me more please"
            return super()._next_answer(rec, structured=structured, invalid=invalid)

    server = Server(
        structured=answer,
        rate_limit=limit,
        latency=latency,
        # only the arrival times are kept: a whole grid's request bodies held made the
        # server's collector pause its loop for up to 0.4 s (four targets), and the requests
        # read after a pause crowd one window
        record=False,
        tokens_per_minute=itpm,
    )
    server.start()
    gc.freeze()  # what start-up made stays out of the collector's passes
    # how late the server's own loop ran (10 ms ticks): a request it reads late is timed
    # late, and a bunch of them fill one of its windows though they were sent apart
    lags: list[float] = []

    async def tick() -> None:
        while True:
            due = time.perf_counter() + 0.01
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - due)

    assert server._loop is not None
    ticking = asyncio.run_coroutine_threadsafe(tick(), server._loop)
    port_q.put(server.port)
    stop.wait()
    ticking.cancel()
    server.stop()
    with server.lock:
        stats_q.put(
            {
                "statuses": dict(server.statuses),
                "times": list(server.arrivals),
                "admitted": server.admitted,
                "refused_times": list(server.refused_times),
                "lags": lags,
                # the stand-in's own CPU: on this machine it shares the cores with the run
                "cpu": time.process_time(),
            }
        )


@dataclass
class Loopback:
    """`loopback`'s server: where it listens, the event that stops it, and once it stopped
    (at the end of the block) what it served (`serve`'s statistics)."""

    url: str
    stop: Any
    stats: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def loopback(
    limit: float, latency: float, itpm: float | None = None, provider: str = "anthropic"
) -> Iterator[Loopback]:
    """`serve` in a spawned process of its own for the block, as every bench that runs the
    workflow against it starts it; `stop.set()` stops it sooner (a replay with the
    provider gone). Its statistics are read when the block ends without an error."""
    ctx = multiprocessing.get_context("spawn")
    port_q, stats_q, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    args = (port_q, stats_q, stop, limit, latency, itpm, provider)
    server = ctx.Process(target=serve, args=args)
    server.start()
    try:
        served = Loopback(f"http://127.0.0.1:{port_q.get(timeout=60)}", stop)
        yield served
    finally:
        stop.set()
    served.stats.update(stats_q.get(timeout=120))
    server.join(timeout=30)


def timeline(times: list[float], step: float = 5.0) -> str:
    """Accepted requests a second, `step` seconds at a time."""
    if not times:
        return ""
    counts: dict[int, int] = {}
    for t in times:
        counts[int((t - times[0]) // step)] = counts.get(int((t - times[0]) // step), 0) + 1
    return " ".join(f"{counts.get(i, 0) / step:.0f}" for i in range(max(counts) + 1))


def steady_rate(times: list[float], ok: int, requests: int) -> float:
    """Accepted requests a second between the 10th and 90th percentile of the arrival
    times (sorted): refused requests do not count as throughput."""
    q10, q90 = (times[len(times) // 10], times[(len(times) * 9) // 10]) if times else (0, 0)
    central = sum(1 for t in times if q10 <= t <= q90)
    return central / (q90 - q10) * ok / requests if q90 > q10 and requests else 0.0


def bench_config(
    url: str,
    motivations: int,
    seeds: int,
    rpm: float | None = None,
    itpm: float | None = None,
    risks: int = 1,
    provider: str = "anthropic",
) -> dict[str, Any]:
    from kora.benchmarks.taxonomy import load_taxonomy

    taxonomy = load_taxonomy(ROOT / "data" / "taxonomy")
    model: dict[str, Any] = {
        "provider": provider,
        "model": "gpt-bench" if provider == "openai" else "claude-bench",
        "base_url": f"{url}/v1" if provider == "openai" else url,
        "timeout": 60,
    }
    if rpm:
        model["requests_per_minute"] = rpm
    if itpm:
        model["input_tokens_per_minute"] = itpm
    return {
        "models": {"bench": model},
        "seed_model": "bench",
        "expand_model": "bench",
        "user_model": "bench",
        "judges": ["bench"],
        "targets": {"gpt-target": None, "bench-target": {"model": "bench"}},
        "grid": {
            # violence first (the slice measured since the first version of this script)
            "risks": sorted(
                (r.id for c in taxonomy.categories for r in c.risks),
                key=lambda r: r != "violence_and_physical_harm",
            )[:risks],
            "age_ranges": "all",
            "motivations": [m.id for m in taxonomy.motivations][:motivations],
            "seeds_per_task": seeds,
        },
    }


def copy_workflow(dest: Path) -> None:
    for name in ("Snakefile", "config.yaml"):
        shutil.copy(ROOT / name, dest / name)
    for d in ("rules", "scripts", "envs"):
        shutil.copytree(ROOT / d, dest / d)
    shutil.copytree(ROOT / "data" / "taxonomy", dest / "data" / "taxonomy")
    if (ROOT / "profiles").is_dir():
        shutil.copytree(ROOT / "profiles", dest / "profiles")


def run(args: argparse.Namespace) -> dict[str, Any]:
    with (
        loopback(args.limit, args.latency, args.input_tokens_per_minute, args.provider) as server,
        tempfile.TemporaryDirectory(prefix="kora-bench-workflow-") as tmp,
    ):
        work = Path(tmp)
        copy_workflow(work)
        cfg = bench_config(
            server.url,
            args.motivations,
            args.seeds,
            args.requests_per_minute,
            args.input_tokens_per_minute if args.configure_tokens else None,
            args.risks,
            args.provider,
        )
        (work / "bench.yaml").write_text(yaml.safe_dump(cfg))
        cmd = [sys.executable, "-m", "snakemake", "--cores", str(args.cores),
               "results/bench-target/results.json", "--configfile", "bench.yaml",
               *shlex.split(args.snakemake_args)]  # fmt: skip
        env = dict(os.environ, ANTHROPIC_API_KEY="sk-loopback", OPENAI_API_KEY="sk-loopback")
        env.pop("KORA_RETRY_TESTING", None)
        if args.no_broker:  # every job makes its own calls, as on a cluster
            env["KORA_NO_BROKER"] = "1"
        started = time.time()
        status, usage, watch = watched_run(cmd, work, env, work / "snakemake.log")
        ended = time.time()
        text = (work / "snakemake.log").read_text(errors="replace")
        if status != 0:
            print(text[-4000:], file=sys.stderr)
            raise SystemExit(f"snakemake failed with exit status {status}")
        results = orjson.loads((work / "results/bench-target/results.json").read_bytes())
        written = (work / "results/bench-target/results.json").stat().st_mtime
        steps = re.findall(r"(\d+) of (\d+) steps", text)
        jobs = int(steps[-1][1]) if steps else 0
    stats = server.stats
    times = sorted(stats["times"])
    ok = stats["statuses"].get(200, 0)
    refused = stats["statuses"].get(429, 0)
    requests = sum(stats["statuses"].values())
    steady = steady_rate(times, ok, requests)
    admitted = sorted(stats["admitted"])
    tokens = sum(n for _, n in admitted)
    # the token bucket holds one second's worth: its rate is the whole budget
    per_second = (
        min(args.limit, args.input_tokens_per_minute / 60.0 / (tokens / max(ok, 1)))
        if args.input_tokens_per_minute and tokens
        else args.limit
    )
    ideal = ok / per_second + CHAIN * args.latency
    steady_tokens = 0.0
    if admitted:
        a10, a90 = admitted[len(admitted) // 10][0], admitted[(len(admitted) * 9) // 10][0]
        inside = sum(n for t, n in admitted if a10 <= t <= a90)
        steady_tokens = inside / (a90 - a10) if a90 > a10 else 0.0
    wall = written - times[0] if times else ended - started
    cpu = usage.ru_utime + usage.ru_stime
    return {
        "tests": results.get("tests", 0) + results.get("failedTests", 0),
        "failed": results.get("failedTests", 0),
        "calls": ok,
        "requests": requests,
        "refused": refused,
        "steady": steady,
        "wall": wall,
        "ideal": ideal,
        "total_wall": ended - started,
        "cpu": cpu,
        "cpu_by_kind": watch.cpu(cpu),
        "broker_wakes": watch.broker_wakes,
        "jobs": jobs,
        "times": times,
        "samples": watch.samples,
        "input_tokens": tokens,
        "steady_tokens": steady_tokens,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cores", type=int, default=10)
    ap.add_argument("--limit", type=float, default=40.0, help="requests a second the server allows")
    ap.add_argument("--latency", type=float, default=1.5, help="seconds per accepted answer")
    ap.add_argument("--motivations", type=int, default=10, help="motivations of the grid slice")
    ap.add_argument("--risks", type=int, default=1, help="risks of the grid slice (violence first)")
    ap.add_argument("--snakemake-args", default="", help="more of Snakemake's options, quoted")
    ap.add_argument("--seeds", type=int, default=8, help="seeds_per_task")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument(
        "--requests-per-minute",
        type=float,
        help="configure the model's limit (default: none, the limiter learns it from 429s)",
    )
    ap.add_argument(
        "--input-tokens-per-minute",
        type=float,
        help="the server also limits input tokens (one second's worth held, refilled "
        "continuously; answers carry anthropic-ratelimit-input-tokens-* headers)",
    )
    ap.add_argument(
        "--configure-tokens",
        action="store_true",
        help="also put that token limit in the model's config (default: the limiter "
        "learns it from the headers alone)",
    )
    ap.add_argument("--timeline", action="store_true", help="requests a second, 5 s at a time")
    ap.add_argument(
        "--no-broker", action="store_true", help="KORA_NO_BROKER=1: every job makes its own calls"
    )
    ap.add_argument(
        "--provider",
        choices=("anthropic", "openai"),
        default="anthropic",
        help="the protocol every role and the target speak: Anthropic's Messages API or "
        "OpenAI's chat completions (the README's real run has an OpenAI target)",
    )
    args = ap.parse_args()
    rows = [run(args) for _ in range(args.runs)]
    print(f"grid: {args.risks} risk(s) x 3 age ranges x {args.motivations} motivations, seeds_per_task "
          f"{args.seeds}; {args.provider} server: {args.limit:g} req/s, {args.latency:g} s latency; "
          f"--cores {args.cores}")  # fmt: skip
    if args.input_tokens_per_minute:
        print(f"  input tokens: at most {args.input_tokens_per_minute:g} a minute "
              f"({'in the model config and ' if args.configure_tokens else ''}"
              f"in the answers' headers)")  # fmt: skip
    for r in rows:
        print(
            f"tests {r['tests']} ({r['failed']} failed), calls {r['calls']}, jobs {r['jobs']}\n"
            f"  steady throughput {r['steady']:.1f} req/s = {r['steady'] / args.limit:.2f} of the "
            f"limit; refused {r['refused']} of {r['requests']} requests "
            f"({100 * r['refused'] / max(r['requests'], 1):.1f} %)\n"
            f"  wall (first call -> results.json) {r['wall']:.1f} s; ideal {r['ideal']:.1f} s; "
            f"ratio {r['wall'] / r['ideal']:.2f} (whole command {r['total_wall']:.1f} s)\n"
            f"  CPU {r['cpu']:.1f} s: {r['cpu'] / max(r['calls'], 1) * 1000:.1f} ms a call, "
            f"{r['cpu'] / max(r['jobs'], 1):.2f} s a job ("
            + ", ".join(
                f"{k} {v:.1f} s = {v / max(r['calls'], 1) * 1000:.1f} ms"
                for k, v in r["cpu_by_kind"].items()
            )
            + ")\n"
            f"  the broker's event loop slept and woke {r['broker_wakes']:,} times: "
            f"{r['broker_wakes'] / max(r['calls'], 1):.2f} a call (bench/cold_wake.py: what "
            "a wake after a spell of sleep costs)"
        )
        if args.input_tokens_per_minute:
            limit = args.input_tokens_per_minute / 60.0
            print(
                f"  steady input tokens {r['steady_tokens']:.0f}/s = "
                f"{r['steady_tokens'] / limit:.2f} of the token limit "
                f"({r['input_tokens'] / max(r['calls'], 1):.0f} a call)"
            )
    if args.timeline:
        for r in rows:
            print(f"  req/s by 5 s: {timeline(r['times'])}")
            for what in ("broker", "snakemake"):
                print(f"  {what}'s share of a core by 5 s: {busy(r['samples'], what, 5.0)}")
    if len(rows) > 1:
        print(
            f"median ratio to ideal {statistics.median(r['wall'] / r['ideal'] for r in rows):.2f}"
        )
    print("reproduce: python bench/workflow.py " + shlex.join(sys.argv[1:]))


if __name__ == "__main__":
    main()
