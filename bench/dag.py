"""DAG size and planning time of the full grid: `snakemake -n` for several mock targets.

The workflow (Snakefile, rules, scripts, taxonomy) is copied to a temp folder with a
config of `--targets` mock targets over the whole grid (25 risks x 3 age ranges x 10
motivations, 8 seeds a task: 6,000 seeds), and `snakemake -n --quiet rules host` plans
their results.json files from scratch. Printed: the job count per rule (Snakemake's "Job
stats"), the wall time split into start-up + parse (until "Building DAG of jobs..."), DAG
building and the rest, and the commands to reproduce. `--profile` runs the same planning
in-process under cProfile and prints where the time goes: Snakemake itself versus this
project's code (rules/*.smk input functions and params, kora/).

    python bench/dag.py                   # 2 targets, ~30 s on 2 cores
    python bench/dag.py --targets 4 --runs 3
    python bench/dag.py --profile         # + cProfile, ~45 s
    python bench/dag.py --done            # -n of a finished run
    python bench/dag.py --done --rerun    # `snakemake --cores 10` of a finished run
    python bench/dag.py -- --rerun-triggers mtime input   # extra snakemake arguments
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from kora.benchmarks.taxonomy import load_taxonomy

ROOT = Path(__file__).resolve().parents[1]


def bench_config(targets: int, seeds_per_task: int) -> dict[str, Any]:
    return {
        "seed_model": "mock",
        "expand_model": "mock",
        "user_model": "mock",
        "judges": ["mock"],
        "targets": {
            f"mock-{i + 1}": {"model": "mock", "prompts": ["default", "child"]}
            for i in range(targets)
        },
        "grid": {
            "risks": "all",
            "age_ranges": "all",
            "motivations": "all",
            "seeds_per_task": seeds_per_task,
        },
    }


def copy_workflow(dest: Path) -> None:
    for name in ("Snakefile", "config.yaml"):
        shutil.copy(ROOT / name, dest / name)
    for d in ("rules", "scripts", "envs"):
        if (ROOT / d).exists():
            shutil.copytree(ROOT / d, dest / d)
    shutil.copytree(ROOT / "data" / "taxonomy", dest / "data" / "taxonomy")


def snakemake_args(cfg: dict[str, Any], extra: list[str], *, real: bool = False) -> list[str]:
    files = [f"results/{t}/results.json" for t in cfg["targets"]]
    # real: the command a user re-runs (`--cores 10`, no -n): onstart, locks and all
    mode = ["--cores", "10"] if real else ["-n", "--quiet", "rules", "host"]
    return [*mode, *extra, "--configfile", "bench.yaml", "--", *files]


def parse_job_stats(text: str) -> dict[str, int]:
    """Snakemake's 'Job stats' table: {rule: count, ..., 'total': n}."""
    m = re.search(r"Job stats:\n.*?\n-+\s+-+\n(.*?)\ntotal\s+(\d+)", text, re.S)
    if not m and "Nothing to be done" in text:
        return {"total": 0}
    if not m:
        raise SystemExit(f"no 'Job stats' table in snakemake's output:\n{text[-3000:]}")
    counts = {}
    for line in m.group(1).splitlines():
        name, n = line.split()
        counts[name] = int(n)
    counts["total"] = int(m.group(2))
    return counts


def plan_once(workdir: Path, args: list[str]) -> dict[str, Any]:
    """One `snakemake -n` in a subprocess; line timestamps split the wall time."""
    cmd = [sys.executable, "-m", "snakemake", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    lines: list[str] = []
    building = stats_at = None
    for line in proc.stdout:
        now = time.perf_counter() - started
        lines.append(line)
        if building is None and line.startswith("Building DAG of jobs"):
            building = now
        if stats_at is None and line.startswith("Job stats:"):
            stats_at = now
    rc = proc.wait()
    total = time.perf_counter() - started
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    out = "".join(lines)
    if rc != 0:
        raise SystemExit(f"snakemake failed ({rc}):\n{out[-3000:]}")
    return {
        "total": total,
        "cpu": cpu,
        "parse": building or 0.0,
        "dag": (stats_at or total) - (building or 0.0),
        "rest": total - (stats_at or total),
        "jobs": parse_job_stats(out),
    }


def make_done(workdir: Path, cfg: dict[str, Any]) -> int:
    """Every output of the grid as an (empty) file, each stage newer than the one before."""
    tax = load_taxonomy(workdir / "data" / "taxonomy")
    base = time.time() + 10  # newer than the prompt templates and taxonomy
    stages: list[list[str]] = [[], [], [], [], []]
    for shard in tax.shards():
        p = shard.path
        stages[0] += [f"data/seeds/{p}.jsonl", f"data/seeds/{p}.status.json"]
        stages[1] += [
            f"data/scenarios/{p}{x}" for x in (".jsonl", ".rejected.jsonl", ".status.json")
        ]
        for t in cfg["targets"]:
            stages[2] += [f"results/{t}/conversations/{p}{x}" for x in (".jsonl", ".status.json")]
            stages[3] += [f"results/{t}/judgments/{p}{x}" for x in (".jsonl", ".status.json")]
    stages[4] = [f"results/{t}/{f}" for t in cfg["targets"] for f in ("results.json", "usage.json")]
    for i, files in enumerate(stages):
        for f in files:
            path = workdir / f
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
            os.utime(path, (base + i, base + i))
    return sum(len(files) for files in stages)


OURS = re.compile(r"(/rules/[^/]+\.smk|/Snakefile|/kora/)")
SNAKEMAKE_DAG = re.compile(r"snakemake/(dag|jobs|rules|script/__init__)\.py$")


def profile_plan(workdir: Path, args: list[str], top: int) -> None:
    """The same planning in-process under cProfile: Snakemake versus this project's code."""
    from snakemake.cli import main as snakemake_main

    cwd = Path.cwd()
    os.chdir(workdir)
    prof = cProfile.Profile()
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            prof.enable()
            try:
                snakemake_main(args)
            except SystemExit as exc:
                if exc.code not in (0, None):
                    raise SystemExit(f"snakemake failed:\n{sink.getvalue()[-3000:]}") from None
            finally:
                prof.disable()
    finally:
        os.chdir(cwd)
    stats = pstats.Stats(prof)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = stats.total_tt  # type: ignore[attr-defined]
    # time inside our frames, counted once: own time of every function in our files
    ours_own = sum(tt for (file, _, _), (_, _, tt, _, _) in raw.items() if OURS.search(file))

    def top_by_cumulative(pattern: re.Pattern[str]) -> list[tuple[float, int, str]]:
        rows = [
            (ct, nc, f"{Path(file).name}:{line}({fn})")
            for (file, line, fn), (_, nc, _, ct, _) in raw.items()
            if pattern.search(file)
        ]
        return sorted(rows, reverse=True)[:top]

    print(f"\ncProfile of the planning (in-process, profiler overhead included): {total:.1f} s")
    print(
        f"  own time in this project's code (rules/*.smk, Snakefile, kora/): {ours_own:.2f} s"
        f" ({100 * ours_own / total:.1f} %)"
    )
    print("  this project's functions by cumulative time (incl. what they call):")
    for ct, nc, name in top_by_cumulative(OURS):
        print(f"    {ct:7.2f} s {nc:7d} calls  {name}")
    print("  Snakemake's DAG/job functions by cumulative time:")
    for ct, nc, name in top_by_cumulative(SNAKEMAKE_DAG):
        print(f"    {ct:7.2f} s {nc:7d} calls  {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", type=int, default=2, help="mock targets (default 2)")
    ap.add_argument("--seeds-per-task", type=int, default=8)
    ap.add_argument("--runs", type=int, default=1, help="plan this many times, report each")
    ap.add_argument("--profile", action="store_true", help="also run under cProfile")
    ap.add_argument("--top", type=int, default=15, help="rows of the profile to print")
    ap.add_argument(
        "--done", action="store_true", help="plan a finished run: every output already there"
    )
    ap.add_argument(
        "--rerun",
        action="store_true",
        help="with --done: the real command instead of -n (`snakemake --cores 10 ...`, "
        "which must say 'Nothing to be done')",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp workflow folder")
    ap.add_argument("extra", nargs="*", help="extra snakemake arguments (after --)")
    a = ap.parse_args()

    cfg = bench_config(a.targets, a.seeds_per_task)
    workdir = Path(tempfile.mkdtemp(prefix="kora-bench-dag-"))
    try:
        copy_workflow(workdir)
        (workdir / "bench.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        if a.rerun and not a.done:
            raise SystemExit("--rerun needs --done (a finished run to re-run)")
        args = snakemake_args(cfg, a.extra, real=a.rerun)
        tax = load_taxonomy(ROOT / "data" / "taxonomy")
        shards = len(tax.shards())
        print(
            f"grid: {len(tax.risks)} risks x 3 age ranges x {len(tax.motivations)} motivations"
            f" = {shards} shards, {shards * a.seeds_per_task:,} seeds; {a.targets} mock targets"
        )
        print(f"workflow copy: {workdir}")
        if a.done:
            print(f"--done: {make_done(workdir, cfg):,} output files written (a finished run)")
        print(f"command (in the copy): snakemake {shlex.join(args)}")
        runs = [plan_once(workdir, args) for _ in range(a.runs)]
        jobs = runs[0]["jobs"]
        print("\njobs:")
        for name, n in jobs.items():
            print(f"  {name:<14} {n:6d}")
        print("\nplanning wall time (s): total = start-up+parse | DAG | rest;  CPU time (s)")
        for r in runs:
            print(
                f"  {r['total']:6.1f} = {r['parse']:5.1f} | {r['dag']:5.1f} | {r['rest']:5.1f};"
                f"  {r['cpu']:6.1f}"
            )
        if a.runs > 1:
            print(f"  median {statistics.median(r['total'] for r in runs):.1f}")
        best = min(runs, key=lambda r: r["total"])
        per_job = (
            f" ({1000 * best['cpu'] / jobs['total']:.1f} ms CPU a job)" if jobs["total"] else ""
        )
        print(
            f"\n{jobs['total']} jobs planned in {best['total']:.1f} s wall, {best['cpu']:.1f} s CPU"
            + per_job
        )
        if a.profile:
            profile_plan(workdir, args, a.top)
        print(f"\nreproduce: python bench/dag.py {shlex.join(sys.argv[1:])}".rstrip())
    finally:
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
