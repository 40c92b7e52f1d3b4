"""Snakemake entry point of rule report: its job, run by kora.smk.report (see kora.dispatch)."""

from typing import Any

from kora.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("report", snakemake)
