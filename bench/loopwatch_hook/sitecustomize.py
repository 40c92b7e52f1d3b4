"""The broker's loop watch for bench/full_grid.py --watch-loop: this folder on PYTHONPATH,
and the broker's process (`python -m kora.run.broker.server`) watches its event loop
(bench/loopwatch.py); every other process the run starts is left as it is."""

import sys
from pathlib import Path

if sys.orig_argv[1:3] == ["-m", "kora.run.broker.server"]:
    sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: bench/
    from bench.loopwatch import install

    install()
