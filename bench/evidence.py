"""The evidence a result carries, measured: `kora bundle`'s size and time, and `kora replay`'s
time, at the demo and at the full v1 grid.

    python bench/evidence.py --demo          # config/demo.yaml, the mock provider
    python bench/evidence.py                 # the whole v1 grid (12,000 tests), ~10 min
    python bench/evidence.py --risks 3       # about a tenth of it

In a temp copy of the workflow: the real command (the demo's, or full_grid.py's against
one loopback Anthropic server in its own process, answering each seed call with as many
seeds as it asks for), then `kora bundle` of the target, then `kora replay` of the bundle
in an empty folder with no API key and every provider's address closed. Printed: the
run's wall time, the manifest's size, the bundle's size and what it holds, the bundle's
and the replay's wall and CPU time, and whether the replay found the result identical.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
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

from bench.workflow import bench_config, copy_workflow, loopback  # noqa: E402


def _timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, float]:
    """Run `cmd`; (wall seconds, CPU seconds of it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with open(log, "wb") as out:
        status = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=out).returncode
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if status not in (0, 1) or (status and "replay" not in cmd):
        print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
        raise SystemExit(f"{' '.join(cmd)} failed with exit status {status}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(work: Path, target: str, configfiles: list[str], env: dict[str, str]) -> dict[str, Any]:
    kora = [sys.executable, "-m", "kora.commands.main"]
    out: dict[str, Any] = {}
    bundle = work.parent / f"{target}.zip"
    cfg = ["--configfile", *configfiles] if configfiles else []
    out["bundle_s"], out["bundle_cpu"] = _timed(
        [*kora, "bundle", target, "-o", str(bundle), *cfg], work, env, work / "bundle.log"
    )
    out["bundle_bytes"] = bundle.stat().st_size
    manifest = orjson.loads((work / f"results/{target}/manifest.json").read_bytes())
    out["manifest_bytes"] = (work / f"results/{target}/manifest.json").stat().st_size
    out["answers"] = manifest["answers"]["count"]
    out["data_files"] = len(manifest["data"])
    out["results_dir_bytes"] = sum(
        f.stat().st_size for f in (work / f"results/{target}").rglob("*") if f.is_file()
    )
    empty = work.parent / "replay-here"
    empty.mkdir()
    offline = {k: v for k, v in env.items() if not k.endswith("_API_KEY")}
    dead = "http://127.0.0.1:9"
    offline |= {"ANTHROPIC_BASE_URL": dead, "OPENAI_BASE_URL": dead, "HTTPS_PROXY": dead}
    log = work.parent / "replay.log"
    out["replay_s"], out["replay_cpu"] = _timed([*kora, "replay", str(bundle)], empty, offline, log)
    out["replay_said"] = log.read_text(errors="replace").strip().splitlines()
    return out


def demo(tmp: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kora-bench-evidence-", dir=tmp) as d:
        work = Path(d) / "project"
        work.mkdir()
        copy_workflow(work)
        shutil.copytree(ROOT / "config", work / "config")
        env = dict(os.environ)
        started = time.perf_counter()
        cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "results/mock-target/report.html",
               "--configfile", "config/demo.yaml"]  # fmt: skip
        _timed(cmd, work, env, work / "run.log")
        run_s = time.perf_counter() - started
        return {"run_s": run_s, **measure(work, "mock-target", ["config/demo.yaml"], env)}


def grid(args: argparse.Namespace) -> dict[str, Any]:
    os.environ["KORA_BENCH_SEEDS_PER_CALL"] = str(args.seeds)
    with (
        loopback(args.limit, args.latency) as server,
        tempfile.TemporaryDirectory(prefix="kora-bench-evidence-", dir=args.tmp) as d,
    ):
        work = Path(d) / "project"
        work.mkdir()
        copy_workflow(work)
        cfg = bench_config(server.url, 10, args.seeds, risks=args.risks)
        (work / "bench.yaml").write_text(yaml.safe_dump(cfg))
        env = dict(os.environ, ANTHROPIC_API_KEY="sk-loopback")
        env.pop("KORA_RETRY_TESTING", None)
        cmd = [sys.executable, "-m", "snakemake", "--cores", str(args.cores),
               "results/bench-target/report.html", "--configfile", "bench.yaml"]  # fmt: skip
        run_s, _ = _timed(cmd, work, env, work / "run.log")
        server.stop.set()  # the provider is gone before the replay
        measured = measure(work, "bench-target", ["bench.yaml"], env)
    return {"run_s": run_s, **measured}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demo", action="store_true", help="the demo (config/demo.yaml) instead")
    ap.add_argument("--risks", type=int, default=25, help="risks of the grid (all: 25)")
    ap.add_argument("--seeds", type=int, default=8, help="seeds_per_task (the default: 8)")
    ap.add_argument("--limit", type=float, default=300.0, help="requests a second allowed")
    ap.add_argument("--latency", type=float, default=1.5, help="seconds per answer")
    ap.add_argument("--cores", type=int, default=10)
    ap.add_argument("--tmp", help="where the temp copy of the workflow goes")
    args = ap.parse_args()
    r = demo(args.tmp) if args.demo else grid(args)
    what = (
        "demo"
        if args.demo
        else f"grid of {args.risks} risks x 3 ages x 10 motivations x {args.seeds} seeds"
    )
    print(
        f"{what}: run {r['run_s']:.0f} s; results folder {r['results_dir_bytes'] / 1e6:,.1f} MB\n"
        f"  manifest.json {r['manifest_bytes'] / 1e3:,.0f} kB ({r['data_files']:,} data files, "
        f"{r['answers']:,} stored answers)\n"
        f"  kora bundle: {r['bundle_bytes'] / 1e6:,.1f} MB in {r['bundle_s']:.1f} s "
        f"({r['bundle_cpu']:.1f} CPU-s)\n"
        f"  kora replay: {r['replay_s']:.1f} s ({r['replay_cpu']:.1f} CPU-s), no key, "
        f"providers unreachable\n  replay said: " + " / ".join(r["replay_said"][-2:])
    )
    print("reproduce: python bench/evidence.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
