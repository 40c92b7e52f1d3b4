"""The bench's look into the broker (bench/full_grid.py puts this folder on PYTHONPATH):
in the broker's process (`python -m kora.run.broker.server`), its CPU and its garbage
collector's at the end of its log (bench/broker_cpu.py) and, with BENCH_WATCH_LOOP=1
(full_grid.py --watch-loop), its event loop's stalls (bench/loopwatch.py); every other
process the run starts is left as it is."""

import os
import sys
from pathlib import Path

if sys.orig_argv[1:3] == ["-m", "kora.run.broker.server"]:
    sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: bench/
    from bench import broker_cpu, loopwatch

    broker_cpu.install()
    if os.environ.get("BENCH_WATCH_LOOP") == "1":
        loopwatch.install()
