"""Why a run stopped, for the closing summary of the Snakemake process.

A job that stops on an error no retry gets past (kora.run.jobs.shard_run.FatalProviderError) leaves a
note in `.kora/stops/<run>/`; when the run ends in error, `closing_summary` reads the
notes and says which kind it was: a configuration error (running the same command again
would fail the same way: fix the config first), a service that could not be reached
(start it, or retry later), or the budget (raise it to go on).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Literal

import orjson

from kora.benchmarks.layout import stops_dir
from kora.io import write_atomic
from kora.run.jobs.progress import RUN_ENV

StopKind = Literal["config", "service", "budget"]


def note_stop(workdir: Path, where: str, message: str, *, why: StopKind) -> None:
    """Leave the reason a job stopped for the run's closing summary (outside a run: none)."""
    run_id = os.environ.get(RUN_ENV)
    if not run_id:
        return
    note = {"where": where, "message": message, "why": why}
    # the job's own message says it too: a note that cannot be written is no failure
    with contextlib.suppress(OSError):
        write_atomic(stops_dir(workdir, run_id) / f"{uuid.uuid4().hex}.json", orjson.dumps(note))


def closing_summary(workdir: Path, run_id: str, *, raise_budget: str = "") -> list[str]:
    """The lines that end a run stopped by such errors (none when no job left a note); the
    notes are removed. `raise_budget`: the command that goes on with a higher budget."""
    folder = stops_dir(workdir, run_id)
    notes = _notes(folder)
    shutil.rmtree(folder, ignore_errors=True)
    lines: list[str] = []
    budget = [str(n["message"]) for n in notes if n.get("why") == "budget"]
    if budget:
        # every job that met it says the same: the last words are the run's
        lines.append(f"the run stopped at its budget: {budget[-1]}.")
        lines.append(
            "Every answer paid for is in the call store; to go on, raise the budget: "
            f"{raise_budget}".rstrip(": ")
        )
        return lines
    for why in ("config", "service"):
        messages = list(dict.fromkeys(str(n["message"]) for n in notes if n.get("why") == why))
        if not messages:
            continue
        if why == "config":
            lines.append(
                "the run stopped on a configuration error: running the same command again "
                "as it is would fail the same way. Fix the config first:"
            )
        else:
            lines.append(
                "the run stopped: a service could not be reached. Start it (or correct "
                "base_url), or retry later:"
            )
        lines += [f"  - {m}" for m in messages[:5]]
    if lines:
        lines.append(
            "then run the same command again: every answer received so far is in the call "
            "store and is not asked again."
        )
    return lines


def stop_kind(workdir: Path, run_id: str) -> StopKind | None:
    """What stopped the run's jobs, as `closing_summary` says it (read before it)."""
    whys = {n.get("why") for n in _notes(stops_dir(workdir, run_id))}
    return next((w for w in STOP_KINDS if w in whys), None)


STOP_KINDS: tuple[StopKind, ...] = ("budget", "config", "service")  # the first found is said


def _notes(folder: Path) -> list[dict[str, object]]:
    notes: list[dict[str, object]] = []
    for f in sorted(folder.glob("*.json")):
        try:
            notes.append(orjson.loads(f.read_bytes()))
        except (OSError, orjson.JSONDecodeError):
            continue
    return notes


def rerun_advice(failures: list[str]) -> str:
    """The last line of a run that finished with failed items (`failures`: the results
    files' failure summaries)."""
    text = "\n".join(failures)
    if "gave an invalid" in text or "child message" in text:
        return (
            "Run the same command again to retry only what failed. Answers that did not "
            "fit their schema are asked afresh; a model that keeps failing them is too "
            "weak for its role: give that role a stronger model."
        )
    return (
        "Run the same command again to retry only what failed (later, if the service "
        "was down or overloaded)."
    )
