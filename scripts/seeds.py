"""Snakemake entry point of rule seeds: its job, run by kora.run.entries.seeds (see kora.run.dispatch)."""

from typing import Any

from kora.run.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("seeds", snakemake)
