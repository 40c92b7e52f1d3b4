"""Snakemake entry point of the results rule: DuckDB aggregation into results.json."""

from typing import Any

from kora.jobs import run_results_job

snakemake: Any  # injected by Snakemake's script: directive

run_results_job(snakemake)
