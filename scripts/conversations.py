"""Snakemake entry point of the conversations stage (all logic lives in kora.jobs)."""

from typing import Any

from kora.jobs import run_snakemake_job

snakemake: Any  # injected by Snakemake's script: directive

run_snakemake_job(snakemake, "conversations")
