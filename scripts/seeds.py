"""Snakemake entry point of rule seeds: its job, run by kora.smk.seeds (see kora.dispatch)."""

from typing import Any

from kora.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("seeds", snakemake)
