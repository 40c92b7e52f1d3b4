"""The broker's garbage collector: fewer, larger passes.

Every call the broker serves makes a few hundred small containers (the request, its
messages, aiohttp's request and response, futures, timers), and about 450 calls are in
flight at 300 requests a second with 1.5 s answers. CPython's default (a young pass every
700 new containers) then walks that same in-flight set again and again: on a tenth of the
v1 grid the collector took 5.6-6.2 s of the broker's 32-37 s of CPU (bench/README.md),
on the one event loop that holds the run at its provider's limit. A young pass every
`YOUNG` containers walks it a hundredth as often; what the run's start made (the modules
imported by then, the run's job specs, the stages) is frozen (`gc.freeze`) once the
prefetch holds it, as it lives as long as the process, so the rare full passes no longer
walk it either.

Cyclic garbage waits longer for its pass: at most `YOUNG` containers of it, a few
megabytes. Everything else is freed by its reference count, as before.
"""

from __future__ import annotations

import gc

# new containers between two young passes (CPython's default: 700)
YOUNG = 50_000
# young passes between two middle passes, and middle between two full (the defaults)
MIDDLE, OLD = 10, 10


def tune() -> None:
    """Set the broker's thresholds."""
    gc.set_threshold(YOUNG, MIDDLE, OLD)


def freeze() -> None:
    """Keep what exists now out of every later pass (the modules and objects the process
    made to start; call once its imports are done and before its work begins)."""
    gc.collect()  # freeze what is alive, not garbage the import left behind
    gc.freeze()
