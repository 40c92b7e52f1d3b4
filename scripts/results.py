"""Snakemake entry point of rule results: its job, run by kora.smk.results (see kora.dispatch)."""

from typing import Any

from kora.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("results", snakemake)
