"""The Snakemake rules' entry points (scripts/report.py, scripts/leaderboard.py): read the
rule's inputs, write its outputs, log what was done."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import orjson

from kora.io import write_atomic, write_json
from kora.records import load_records
from kora.report.leaderboard import build_leaderboard
from kora.report.pages import render_leaderboard, write_report
from kora.taxonomy import Taxonomy

log = logging.getLogger("kora")


def _taxonomy_of(smk: Any) -> Taxonomy | None:
    from kora.errors import KoraError
    from kora.workflow import Plan

    try:
        return Plan.load(workdir=Path.cwd(), values=dict(smk.config)).taxonomy
    except KoraError as exc:  # the figures do not need names: ids will do
        log.warning("taxonomy not loaded (%s): the report shows ids", exc)
        return None


def run_report_job(smk: Any) -> None:
    """rule report: a target's judgment shards + results.json -> report.html, summary.json."""
    from kora.jobs import setup_logging

    setup_logging(smk.log[0] if smk.log else None)
    started = time.monotonic()
    results = orjson.loads(Path(smk.input.results).read_bytes())
    records = load_records(smk.input.judgments)
    summary = write_report(records, results, smk.output.html, smk.output.summary, _taxonomy_of(smk))
    log.info(
        "%s: report of %d tests (%d failed) in %.1f s",
        smk.wildcards.target,
        summary["tests"],
        summary["errors"],
        time.monotonic() - started,
    )


def run_leaderboard_job(smk: Any) -> None:
    """rule leaderboard: every target's results.json (+ judgments) -> leaderboard.html/.json."""
    from kora.jobs import setup_logging

    setup_logging(smk.log[0] if smk.log else None)
    targets = list(smk.params.targets)
    entries = {}
    for f in smk.input.results:
        res = orjson.loads(Path(f).read_bytes())
        entries[str(res.get("target") or Path(f).parent.name)] = res
    files: dict[str, list[str]] = {t: [] for t in targets}
    for f in smk.input.judgments:
        parts = Path(f).parts
        t = parts[parts.index("results") + 1] if "results" in parts else ""
        files.setdefault(t, []).append(str(f))
    records = {t: load_records(fs) for t, fs in files.items() if fs}
    taxonomy = _taxonomy_of(smk)
    doc = build_leaderboard(entries, records, taxonomy=taxonomy)
    write_atomic(smk.output.html, render_leaderboard(doc, taxonomy).encode())
    write_json(smk.output.json, doc)
    log.info("leaderboard of %d targets, %d pairs", len(doc["targets"]), len(doc["pairs"]))
