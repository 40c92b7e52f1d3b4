"""Snakemake entry point of rule report: its job, run by kora.run.entries.report (see kora.run.dispatch)."""

from typing import Any

from kora.run.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("report", snakemake)
