"""Snakemake entry point of rule results: its job, run by kora.run.entries.results (see kora.run.dispatch)."""

from typing import Any

from kora.run.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("results", snakemake)
