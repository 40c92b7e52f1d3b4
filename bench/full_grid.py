"""A full-grid rehearsal: the whole v1 grid for one target, end to end, at a provider limit.

    python bench/full_grid.py                 # 25 risks x 3 ages x 10 motivations x 8 seeds
    python bench/full_grid.py --risks 3       # about a tenth (1,440 tests)
    python bench/full_grid.py --limit 150 --latency 1.5

The real commands in a temp copy of the workflow, every role and the target on one
loopback Anthropic Messages server in its own process (bench/workflow.py's: at most
`--limit` requests a second, 429 with Retry-After past it, each answer after `--latency`
seconds; a seed call gets as many seeds as it asks for):

1. `snakemake -n` (the DAG's planning time, and its job count);
2. `snakemake --cores 10 results/bench-target/results.json` from a cold start: wall from
   the first request to results.json against the ideal (`calls / limit + 11 dependent
   calls x latency`), steady throughput, refused share, CPU a call, and the peak memory of
   each kind of process (Snakemake's, the broker's, the largest job's; resident set, read
   from /proc twice a second) and of the whole tree at once;
3. the disk used under data/, results/ and .kora/;
4. the aggregation alone (`--forcerun results`, every judgment read again) and the report
   (`results/bench-target/report.html`), each timed, no call made.
"""

from __future__ import annotations

import argparse
import os
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

from bench.procs import Watch, busy  # noqa: E402
from bench.workflow import (  # noqa: E402
    CHAIN,
    bench_config,
    copy_workflow,
    loopback,
    steady_rate,
    timeline,
)

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


def rehearse(args: argparse.Namespace) -> dict[str, Any]:
    # the loopback's seed answers: as many as the prompt asks for (bench.workflow.answer)
    os.environ["KORA_BENCH_SEEDS_PER_CALL"] = str(args.seeds)
    out: dict[str, Any] = {}
    with (
        loopback(args.limit, args.latency) as server,
        tempfile.TemporaryDirectory(prefix="kora-bench-grid-", dir=args.tmp) as tmp,
    ):
        work = Path(tmp)
        copy_workflow(work)
        cfg = bench_config(server.url, args.motivations, args.seeds, risks=args.risks)
        (work / "bench.yaml").write_text(yaml.safe_dump(cfg))
        env = dict(os.environ, ANTHROPIC_API_KEY="sk-loopback")
        env.pop("KORA_RETRY_TESTING", None)
        if args.no_broker:  # every job makes its own calls, as on a cluster
            env["KORA_NO_BROKER"] = "1"
        target = ["results/bench-target/results.json", "--configfile", "bench.yaml"]
        smk = [sys.executable, "-m", "snakemake"]
        out["plan_s"] = _timed([*smk, "-n", "--cores", "10", *target], work, env, "plan.log")
        plan = (work / "plan.log").read_text(errors="replace")
        total_line = [ln for ln in plan.splitlines() if ln.strip().startswith("total")]
        out["jobs"] = int(total_line[-1].split()[1]) if total_line else 0

        cmd = [*smk, "--cores", str(args.cores), *target]
        started = time.time()
        with open(work / "run.log", "wb") as log:
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=log)
            watch = Watch(proc.pid)
            watch.start()
            _, status, usage = os.wait4(proc.pid, 0)
            watch.done.set()
            watch.join()
        if os.waitstatus_to_exitcode(status) != 0:
            print((work / "run.log").read_text(errors="replace")[-4000:], file=sys.stderr)
            raise SystemExit("the run failed")
        out["run_s"] = time.time() - started
        results_path = work / "results/bench-target/results.json"
        results = orjson.loads(results_path.read_bytes())
        out["written"] = results_path.stat().st_mtime
        out["tests"] = results.get("tests", 0) + results.get("failedTests", 0)
        out["failed"] = results.get("failedTests", 0)
        out["cpu"] = usage.ru_utime + usage.ru_stime
        out["cpu_by_kind"] = watch.cpu(out["cpu"])
        out["memory"] = dict(watch.peak, all=watch.total)
        out["at_peak"] = watch.at_peak
        out["samples"] = watch.samples
        out["disk"] = {d: _du(work / d) for d in ("data", "results", ".kora")}
        out["aggregate_s"] = _timed(
            [*smk, "--cores", "2", *target, "--forcerun", "results"], work, env, "agg.log"
        )
        report = ["results/bench-target/report.html", "--configfile", "bench.yaml"]
        out["report_s"] = _timed([*smk, "--cores", "2", *report], work, env, "report.log")
        out["report_bytes"] = (work / "results/bench-target/report.html").stat().st_size
    stats = server.stats
    times = sorted(stats["times"])
    ok = stats["statuses"].get(200, 0)
    requests = sum(stats["statuses"].values())
    steady = steady_rate(times, ok, requests)
    out |= {
        "calls": ok,
        "refused": stats["statuses"].get(429, 0),
        "requests": requests,
        "steady": steady,
        "times": times,
        "wall": out["written"] - times[0] if times else out["run_s"],
        "ideal": ok / args.limit + CHAIN * args.latency,
    }
    return out


def mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n < 10e6 else f"{n / 1e6:,.0f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--risks", type=int, default=25, help="risks of the grid (all: 25)")
    ap.add_argument("--motivations", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=8, help="seeds_per_task (the default: 8)")
    ap.add_argument("--limit", type=float, default=300.0, help="requests a second allowed")
    ap.add_argument("--latency", type=float, default=1.5, help="seconds per answer")
    ap.add_argument("--cores", type=int, default=10)
    ap.add_argument("--tmp", help="where the temp copy of the workflow goes")
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
    r = rehearse(args)
    print(
        f"grid: {args.risks} risks x 3 ages x {args.motivations} motivations x {args.seeds} "
        f"seeds x 2 prompts; server {args.limit:g} req/s, {args.latency:g} s latency; "
        f"--cores {args.cores}\n"
        f"tests {r['tests']:,} ({r['failed']} failed), calls {r['calls']:,}, jobs {r['jobs']:,}\n"
        f"  planning (snakemake -n) {r['plan_s']:.1f} s\n"
        f"  wall (first call -> results.json) {r['wall']:.0f} s; ideal {r['ideal']:.0f} s; "
        f"ratio {r['wall'] / r['ideal']:.2f} (whole command {r['run_s']:.0f} s)\n"
        f"  steady throughput {r['steady']:.1f} req/s = {r['steady'] / args.limit:.2f} of the "
        f"limit; refused {r['refused']:,} of {r['requests']:,} "
        f"({100 * r['refused'] / max(r['requests'], 1):.1f} %)\n"
        f"  CPU {r['cpu']:.0f} s = {r['cpu'] / max(r['calls'], 1) * 1000:.1f} ms a call ("
        + ", ".join(f"{k} {v:.1f} s" for k, v in r["cpu_by_kind"].items())
        + ")\n"
        "  peak memory: "
        + ", ".join(f"{k} {mb(v)}" for k, v in sorted(r["memory"].items()))
        + "\n  all at once, by process: "
        + ", ".join(f"{k} {mb(v)}" for k, v in sorted(r["at_peak"].items(), key=lambda kv: -kv[1]))
        + "\n  disk: "
        + ", ".join(f"{k}/ {mb(v)}" for k, v in r["disk"].items())
        + f"\n  aggregation alone {r['aggregate_s']:.1f} s; report {r['report_s']:.1f} s "
        f"({mb(r['report_bytes'])})"
    )
    if args.timeline:
        print(f"  req/s by 10 s: {timeline(r['times'], 10.0)}")
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
    ms = r["cpu"] / max(r["calls"], 1) * 1000
    if ms > MAX_MS_A_CALL:
        out.append(f"{ms:.1f} ms of CPU a call, over {MAX_MS_A_CALL:g}")
    if r["wall"] > MAX_RATIO * r["ideal"]:
        out.append(f"wall {r['wall']:.0f} s, over {MAX_RATIO:g}x the ideal {r['ideal']:.0f} s")
    return out


if __name__ == "__main__":
    main()
