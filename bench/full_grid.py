"""A full-grid rehearsal: the whole v1 grid for one target, end to end, at a provider limit.

    python bench/full_grid.py                 # 25 risks x 3 ages x 10 motivations x 8 seeds
    python bench/full_grid.py --risks 3       # about a tenth (1,440 tests)
    python bench/full_grid.py --limit 150 --latency 1.5
    python bench/full_grid.py --risks 3 --targets 4   # a leaderboard's run: 4 targets
    python bench/full_grid.py --benchmark v2  # the whole v2 grid: 26 risks, 462 seeds each

The real commands in a temp copy of the workflow, every role and the target on one
loopback Anthropic Messages server in its own process (bench/workflow.py's: at most
`--limit` requests a second, 429 with Retry-After past it, each answer after `--latency`
seconds; a seed call gets as many seeds as it asks for). With `--targets N`, each target
is a model on a server of its own with its own limit, and the child, the scenario writers
and the judge share the first server, whose limit then binds:

1. `snakemake -n` (the DAG's planning time, and its job count);
2. the command a user types, `snakemake --cores 10 results/bench-target/report.html` (each
   target's report.html), from a cold start: wall from the first request to results.json
   against the ideal (`calls / limit + 11 dependent calls x latency`), steady throughput, refused share (with `--timeline`, when: each
   server's refusals in seconds from the first call), how often each server's own loop
   ran late (it times a request when it reads it: a late loop bunches what was sent
   apart; `--dump` writes each server's arrival times), CPU a call, and the peak memory of
   each kind of process (Snakemake's, the broker's, the largest job's; resident set) and of
   the whole tree at once: the largest sum of every process's Pss (proportional memory,
   /proc/<pid>/smaps_rollup), with what each process held at that moment (Snakemake, the
   broker, each job by its rule's name) and the most one process of each held at any
   moment, all read from /proc ten times a second (bench/procs.py); the report's own time,
   from its job's log;
3. the disk used under data/, results/ and .kora/;
4. the aggregation alone (`--forcerun results`, every judgment read again), timed, no call
   made.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.procs import busy, watched_run  # noqa: E402
from bench.workflow import (  # noqa: E402
    CHAIN,
    bench_config,
    copy_workflow,
    loopback,
    steady_rate,
    timeline,
)
from tests.loopback import busiest_second  # noqa: E402

# v2's chain: seeds, expand, validate, the first child message, 8 target replies and 7
# child messages in turn (its longest risks' 8 turns), then the safety and mechanism
# judgments side by side (kora.benchmarks.v2.judge)
CHAIN_V2 = 20
# v2's seeds a risk: 26 risks x 462 seeds x v2's one prompt (`default`) = 12,012 tests,
# the size of v1's whole grid
V2_SEEDS = 462


def v2_grid(risks: int, total_seeds: int) -> dict[str, Any]:
    """The v2 grid: the first `risks` of v2's taxonomy (its 8-turn risks first, the
    run's critical path), `total_seeds` census-matched seeds each."""
    from kora import benchmarks

    found = [r for c in benchmarks.get("v2").taxonomy.categories for r in c.risks]
    found.sort(key=lambda r: -r.turns())
    return {
        "risks": [r.id for r in found][:risks],
        "total_seeds": total_seeds,
        "distribution": "us-census-2020",
        "random_seed": 7,
    }


# CI's bound on the quick rehearsal (`--risks 3 --bound`): four times the CPU a call and
# three times the wall the quiet machine measures (bench/README.md), so that only a
# collapse (a job per cell again, a quadratic pool) fails it, not a loaded machine
MAX_MS_A_CALL = 20.0
MAX_RATIO = 3.0


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def _timed(cmd: list[str], work: Path, env: dict[str, str], log: str) -> float:
    started = time.perf_counter()
    with open(work / log, "wb") as out:
        status = subprocess.run(cmd, cwd=work, env=env, stdout=out, stderr=out).returncode
    if status != 0:
        print((work / log).read_text(errors="replace")[-4000:], file=sys.stderr)
        raise SystemExit(f"{shlex.join(cmd)} failed with exit status {status}")
    return time.perf_counter() - started


def target_names(n: int) -> list[str]:
    return ["bench-target"] if n == 1 else [f"target-{i + 1}" for i in range(n)]


def rehearse(args: argparse.Namespace) -> dict[str, Any]:
    # the loopback's seed answers: as many as the prompt asks for (bench.workflow.answer);
    # v2's census plan asks for one seed a call
    seeds = 1 if args.benchmark == "v2" else args.seeds
    os.environ["KORA_BENCH_SEEDS_PER_CALL"] = str(seeds)
    out: dict[str, Any] = {}
    names = target_names(args.targets)
    with contextlib.ExitStack() as stack:
        # the child, the scenario writers and the judge on one server; with --targets N,
        # each target on a server of its own, each server with its own limit
        server = stack.enter_context(loopback(args.limit, args.latency))
        own = (
            {n: stack.enter_context(loopback(args.limit, args.latency)) for n in names}
            if args.targets > 1
            else {}
        )
        if args.keep:  # the run's folder stays, for a look at what it wrote
            work = Path(tempfile.mkdtemp(prefix="kora-bench-grid-", dir=args.tmp))
            print(f"the run's folder (kept): {work}", flush=True)
        else:
            tmp = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="kora-bench-grid-", dir=args.tmp)
            )
            work = Path(tmp)
        copy_workflow(work)
        cfg = bench_config(server.url, args.motivations, args.seeds, risks=args.risks)
        if args.benchmark == "v2":
            cfg["benchmark"] = "v2"
            cfg["grid"] = v2_grid(args.risks, args.total_seeds)
        if own:
            cfg["targets"] = {"gpt-target": None, "bench-target": None}
            for n, at in own.items():
                # a model of its own: the same model id would share its answers through
                # the call store, whose keys leave the server's address out
                cfg["models"][n] = dict(cfg["models"]["bench"], base_url=at.url, model=n)
                cfg["targets"][n] = {"model": n}
        (work / "bench.yaml").write_text(yaml.safe_dump(cfg))
        env = dict(os.environ, ANTHROPIC_API_KEY="sk-loopback")
        env.pop("KORA_RETRY_TESTING", None)
        if args.no_broker:  # every job makes its own calls, as on a cluster
            env["KORA_NO_BROKER"] = "1"
        # the broker's CPU and its collector's at the end of its log (bench/broker_cpu.py),
        # and with --watch-loop its loop's stalls (bench/loopwatch.py)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT / "bench" / "broker_hook"), env.get("PYTHONPATH")) if p
        )
        env["BENCH_WATCH_LOOP"] = "1" if args.watch_loop else ""
        top = "results-v2" if args.benchmark == "v2" else "results"
        results = [f"{top}/{n}/results.json" for n in names]
        reports = [f"{top}/{n}/report.html" for n in names]
        target = [*reports, "--configfile", "bench.yaml"]
        smk = [sys.executable, "-m", "snakemake"]
        out["plan_s"] = _timed([*smk, "-n", "--cores", "10", *target], work, env, "plan.log")
        plan = (work / "plan.log").read_text(errors="replace")
        total_line = [ln for ln in plan.splitlines() if ln.strip().startswith("total")]
        out["jobs"] = int(total_line[-1].split()[1]) if total_line else 0

        cmd = [*smk, "--cores", str(args.cores), *target]
        started = time.time()
        status, usage, watch = watched_run(cmd, work, env, work / "run.log")
        if status != 0:
            print((work / "run.log").read_text(errors="replace")[-4000:], file=sys.stderr)
            raise SystemExit("the run failed")
        out["run_s"] = time.time() - started
        out["tests"] = out["failed"] = 0
        out["written"] = 0.0
        for path in results:
            got = orjson.loads((work / path).read_bytes())
            out["tests"] += got.get("tests", 0) + got.get("failedTests", 0)
            out["failed"] += got.get("failedTests", 0)
            out["written"] = max(out["written"], (work / path).stat().st_mtime)
        out["cpu"] = usage.ru_utime + usage.ru_stime
        out["cpu_by_kind"] = watch.cpu(out["cpu"])
        out["broker_wakes"] = watch.broker_wakes
        out["memory"] = dict(watch.peak, all=watch.total, **{"all, proportional": watch.total_pss})
        out["at_peak"] = watch.at_peak
        out["at_peak_count"] = watch.at_peak_count
        out["peak_at_s"] = watch.at_peak_time - started
        out["peak_pss"] = watch.peak_pss
        out["samples"] = watch.samples
        out["disk"] = {d: _du(work / d) for d in ("data", top, ".kora")}
        out["run_log"] = (work / "run.log").read_text(errors="replace")
        # the broker's closing lines: its CPU and its collector's (logs/, or logs/v2/)
        broker_log = "".join(p.read_text(errors="replace") for p in work.glob("logs/**/broker.log"))
        out["loop_cpu"] = _said(broker_log, "the broker's CPU: ")
        out["collector"] = _said(broker_log, "garbage collector: ")
        out["loop"] = _said(broker_log, "the broker's loop: ")
        # a stage's job that ran in its own process though a broker served the run (a
        # whole job's memory, 200 MB, where its script waits as a 0.4 MB shell)
        out["alone"] = sorted(
            str(p.relative_to(work))
            for stage in ("seeds", "scenarios", "conversations", "judgments")
            for p in work.glob(f"logs/**/{stage}/**/*.log")
            if "(its own)" in p.read_text(errors="replace")
        )
        first = [results[0], "--configfile", "bench.yaml"]
        out["aggregate_s"] = _timed(
            [*smk, "--cores", "2", *first, "--forcerun", "results"], work, env, "agg.log"
        )
        # the report job's own time (kora.run.jobs.gather.report logs it), and its page's size
        report_log = "".join(p.read_text(errors="replace") for p in work.glob("logs/**/*.log"))
        out["report_s"] = [float(t) for t in _REPORT_TIME.findall(report_log)]
        out["report_bytes"] = (work / reports[0]).stat().st_size
    out |= served(server.stats, args.limit)
    out["own"] = {n: served(at.stats, args.limit) for n, at in own.items()}
    calls = out["calls"] + sum(o["calls"] for o in out["own"].values())
    firsts = [o["times"][0] for o in (out, *out["own"].values()) if o["times"]]
    out |= {
        "all_calls": calls,
        "wall": out["written"] - min(firsts) if firsts else out["run_s"],
        # the shared server binds: its calls at its limit, then the chain's latencies
        "ideal": out["calls"] / args.limit
        + (CHAIN_V2 if args.benchmark == "v2" else CHAIN) * args.latency,
    }
    return out


def _said(log: str, marker: str) -> list[str]:
    """What each line of `log` holding `marker` says after it."""
    return [ln.split(marker, 1)[1] for ln in log.splitlines() if marker in ln]


_REPORT_TIME = re.compile(r": report of \d+ tests \(\d+ failed\) in ([\d.]+) s")
_DATED = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$")
_STARTED = re.compile(r"^(?:local)?rule (\w+):$")
_FINISHED = re.compile(r"^Finished jobid: \d+ \(Rule: (\w+)\)$")


def jobs_running(log: str, start: float, step: float, windows: int) -> dict[str, str]:
    """Snakemake's jobs running at the end of each `step` seconds from `start` (epoch
    seconds), by rule, from the dated lines its log gives each job's start and end."""
    when = 0.0
    events: list[tuple[float, str, int]] = []
    for line in log.splitlines():
        line = line.strip()
        if m := _DATED.match(line):
            when = time.mktime(time.strptime(m.group(1), "%a %b %d %H:%M:%S %Y"))
        elif m := _STARTED.match(line):
            events.append((when, m.group(1), 1))
        elif m := _FINISHED.match(line):
            events.append((when, m.group(1), -1))
    out: dict[str, str] = {}
    for rule in dict.fromkeys(r for _, r, _ in events):
        counts = [
            sum(d for t, r, d in events if r == rule and t < start + (i + 1) * step)
            for i in range(windows)
        ]
        out[rule] = " ".join(str(c) for c in counts)
    return out


def served(stats: dict[str, Any], limit: float) -> dict[str, Any]:
    """What one loopback server served: calls, refusals, the steady rate, and the most
    requests it admitted in any one second."""
    times = sorted(stats["times"])
    admitted = sorted(t for t, _ in stats.get("admitted", []))
    ok = stats["statuses"].get(200, 0)
    requests = sum(stats["statuses"].values())
    return {
        "calls": ok,
        "refused": stats["statuses"].get(429, 0),
        "requests": requests,
        "steady": steady_rate(times, ok, requests),
        "times": times,
        "busiest": busiest_second(admitted),
        "refused_at": sorted(stats.get("refused_times", [])),
        "admitted": admitted,
        "lags": stats.get("lags", []),
        "server_cpu": stats.get("cpu", 0.0),
    }


def lagged(o: dict[str, Any]) -> str:
    """How often the server's own loop ran late, and by how much (its 10 ms ticks)."""
    lags = o["lags"]
    if not lags:
        return ""
    late = [x for x in lags if x > 0.02]
    return (
        f"; its loop late over 20 ms {len(late)} times of {len(lags)} "
        f"({sum(late):.1f} s, the longest {max(lags) * 1000:.0f} ms); its CPU {o['server_cpu']:.0f} s"
    )


def mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n < 10e6 else f"{n / 1e6:,.0f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--benchmark", choices=("v1", "v2"), default="v1")
    ap.add_argument(
        "--risks", type=int, help="risks of the grid (default: all, v1's 25 or v2's 26)"
    )
    ap.add_argument(
        "--total-seeds", type=int, default=V2_SEEDS, help="v2: seeds a risk (12,012 tests)"
    )
    ap.add_argument("--motivations", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=8, help="seeds_per_task (the default: 8)")
    ap.add_argument("--limit", type=float, default=300.0, help="requests a second allowed")
    ap.add_argument("--latency", type=float, default=1.5, help="seconds per answer")
    ap.add_argument("--cores", type=int, default=10)
    ap.add_argument(
        "--targets",
        type=int,
        default=1,
        help="targets in the one run, each on a loopback server of its own with its own "
        "--limit; the child and the judge share one more (issue 39, goal 2)",
    )
    ap.add_argument("--tmp", help="where the temp copy of the workflow goes")
    ap.add_argument("--keep", action="store_true", help="leave the run's folder in place")
    ap.add_argument(
        "--dump", type=Path, help="write each server's arrival and refusal times here (JSON)"
    )
    ap.add_argument(
        "--watch-loop",
        action="store_true",
        help="the broker's event-loop stalls and where they were (bench/loopwatch.py)",
    )
    ap.add_argument(
        "--no-broker", action="store_true", help="KORA_NO_BROKER=1: every job makes its own calls"
    )
    ap.add_argument("--timeline", action="store_true", help="requests a second, 10 s at a time")
    ap.add_argument(
        "--bound",
        action="store_true",
        help=f"exit 1 past a generous bound (CI's check for a collapse): a failed test, over "
        f"{MAX_MS_A_CALL:g} ms of CPU a call, or a wall time over {MAX_RATIO:g}x the ideal",
    )
    args = ap.parse_args()
    if args.risks is None:
        args.risks = 26 if args.benchmark == "v2" else 25
    r = rehearse(args)
    if args.dump:
        servers = {"shared": r, **r["own"]}
        keep = ("times", "admitted", "refused_at", "lags")
        args.dump.write_bytes(
            orjson.dumps({k: {f: o[f] for f in keep} for k, o in servers.items()})
        )
    grid = (
        f"v2, {args.risks} risks x {args.total_seeds} seeds x 1 prompt"
        if args.benchmark == "v2"
        else f"{args.risks} risks x 3 ages x {args.motivations} motivations x {args.seeds} "
        "seeds x 2 prompts"
    )
    print(
        f"grid: {grid}; server {args.limit:g} req/s, {args.latency:g} s latency; "
        f"--cores {args.cores}; {args.targets} target(s)\n"
        f"tests {r['tests']:,} ({r['failed']} failed), calls {r['all_calls']:,}, "
        f"jobs {r['jobs']:,}\n"
        f"  planning (snakemake -n) {r['plan_s']:.1f} s\n"
        f"  wall (first call -> results.json) {r['wall']:.0f} s; ideal {r['ideal']:.0f} s; "
        f"ratio {r['wall'] / r['ideal']:.2f} (whole command {r['run_s']:.0f} s)\n"
        + "".join(
            f"  {who}: {o['calls']:,} calls, steady {o['steady']:.1f} req/s = "
            f"{o['steady'] / args.limit:.2f} of its limit, busiest second {o['busiest']}; "
            f"refused {o['refused']:,} of {o['requests']:,} "
            f"({100 * o['refused'] / max(o['requests'], 1):.1f} %){lagged(o)}\n"
            for who, o in [("shared server" if r["own"] else "server", r), *r["own"].items()]
        )
        + f"  CPU {r['cpu']:.0f} s = {r['cpu'] / max(r['all_calls'], 1) * 1000:.1f} ms a call, "
        f"{r['cpu'] / r['run_s']:.2f} of a core over the whole command ("
        + ", ".join(f"{k} {v:.1f} s" for k, v in r["cpu_by_kind"].items())
        + ")\n"
        + f"  the broker's event loop slept and woke {r['broker_wakes']:,} times: "
        + f"{r['broker_wakes'] / max(r['all_calls'], 1):.2f} a call\n"
        + "".join(f"  the broker's garbage collector: {c}\n" for c in r["collector"])
        + "".join(f"  the broker's CPU: {c}\n" for c in r["loop_cpu"])
        + "".join(f"  the broker's loop: {c}\n" for c in r["loop"])
        + f"  stage jobs that ran in their own process: {len(r['alone'])} "
        + (f"({', '.join(r['alone'][:5])})\n" if r["alone"] else "(each went to the broker)\n")
        + "  peak memory: "
        + ", ".join(f"{k} {mb(v)}" for k, v in sorted(r["memory"].items()))
        + f"\n  all at once (the sum of Pss) {mb(r['memory']['all, proportional'])}, "
        f"{r['peak_at_s']:.0f} s into the command; by process then: "
        + ", ".join(
            f"{k} {mb(v)}"
            + (f" ({r['at_peak_count'][k]} processes)" if r["at_peak_count"][k] > 1 else "")
            for k, v in sorted(r["at_peak"].items(), key=lambda kv: -kv[1])
        )
        + "\n  the most one process held (Pss), by name: "
        + ", ".join(f"{k} {mb(v)}" for k, v in sorted(r["peak_pss"].items(), key=lambda kv: -kv[1]))
        + "\n  disk: "
        + ", ".join(f"{k}/ {mb(v)}" for k, v in r["disk"].items())
        + f"\n  aggregation alone {r['aggregate_s']:.1f} s; report "
        + ", ".join(f"{t:.1f} s" for t in r["report_s"])
        + f" in the run ({mb(r['report_bytes'])})"
    )
    if args.timeline:
        rates = timeline(r["times"], 10.0)
        print(f"  req/s by 10 s: {rates}")
        start = min(r["times"], default=0.0)
        for who, o in [("shared server", r), *r["own"].items()]:
            if o["refused_at"]:
                at = " ".join(f"{t - start:.1f}" for t in o["refused_at"][:40])
                print(f"  {who}: refused at (s from the first call): {at}")
        windows = len(rates.split())
        running = jobs_running(r["run_log"], start, 10.0, windows)
        for rule, counts in running.items():
            print(f"  {rule} jobs running at the end of each 10 s: {counts}")
        for what in ("broker", "snakemake"):
            print(f"  {what}'s share of a core by 10 s: {busy(r['samples'], what, 10.0)}")
    print("reproduce: python bench/full_grid.py " + shlex.join(sys.argv[1:]))
    if args.bound:
        problems = collapsed(r)
        for p in problems:
            print(f"bound: {p}", file=sys.stderr)
        if problems:
            raise SystemExit(1)
        print(f"bound: within {MAX_MS_A_CALL:g} ms a call and {MAX_RATIO:g}x the ideal")


def collapsed(r: dict[str, Any]) -> list[str]:
    """What of a rehearsal is past the bound that CI holds it to."""
    out = []
    if r["failed"] or not r["tests"]:
        out.append(f"{r['failed']} of {r['tests']} tests failed")
    ms = r["cpu"] / max(r["all_calls"], 1) * 1000
    if ms > MAX_MS_A_CALL:
        out.append(f"{ms:.1f} ms of CPU a call, over {MAX_MS_A_CALL:g}")
    if r["wall"] > MAX_RATIO * r["ideal"]:
        out.append(f"wall {r['wall']:.0f} s, over {MAX_RATIO:g}x the ideal {r['ideal']:.0f} s")
    return out


if __name__ == "__main__":
    main()
