"""The offline runs README.md and docs/kora-v2.md show, timed as a new user types them: each
in a fresh copy of the workflow with no call store; and the quick lane of the tests.

    python bench/demos.py                  # the v1 and v2 demos, the shipped v2 scenarios,
                                           # then the quick lane
    python bench/demos.py demo demo-v2     # some of them
    python bench/demos.py quick-lane       # `pytest -m "not slow" -n 2 -q` in this checkout

Printed: the date, and per command its wall and CPU time (the command's and its children's)
and the machine's load average when it started. The pages quote these figures with the date
they were measured; a test checks the counts the pages quote, never a time
(tests/test_readme.py).
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.workflow import copy_workflow  # noqa: E402

SCENARIOS = ROOT.parent / "shared" / "upstream" / "v2" / "data" / "scenarios.jsonl"
RUNS = {
    "demo": ["snakemake --cores 2 results/mock-target/report.html --configfile config/demo.yaml"],
    "demo-v2": [
        "snakemake --cores 2 results-v2/mock-target/report.html --configfile config/demo-v2.yaml"
    ],
    "shipped-v2": [
        f"kora import-scenarios {SCENARIOS} --configfile config/mock-v2.yaml",
        "snakemake --cores 10 results-v2/mock-target/report.html --configfile config/mock-v2.yaml",
    ],
}
QUICK_LANE = 'pytest -m "not slow" -n 2 -q'  # in this checkout, not in a copy


def timed(command: str, cwd: Path) -> str:
    """Run `command` with bash in `cwd`; its figures as one line (it must succeed)."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(
            f"{command} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        )
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return f"{wall:7.1f} s wall {cpu:7.1f} s CPU  load {load:4.1f}  {command}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = [*RUNS, "quick-lane"]
    ap.add_argument("runs", nargs="*", metavar="RUN", help=f"{', '.join(names)} (default: all)")
    args = ap.parse_args()
    if set(args.runs) - set(names):
        ap.error(f"a run is one of {', '.join(names)}")
    os.environ["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    print(f"{datetime.date.today().isoformat()}, {os.cpu_count()} cores")
    for name in args.runs or names:
        if name == "quick-lane":
            print(f"{name:<11}{timed(QUICK_LANE, ROOT)}", flush=True)
            continue
        with tempfile.TemporaryDirectory(prefix=f"kora-bench-{name}-") as tmp:
            work = Path(tmp)
            copy_workflow(work)
            shutil.copytree(ROOT / "config", work / "config")
            for command in RUNS[name]:
                print(f"{name:<11}{timed(command, work)}", flush=True)


if __name__ == "__main__":
    main()
