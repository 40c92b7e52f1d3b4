"""Snakemake entry point of rule scenarios: its job, run by kora.smk.scenarios (see kora.dispatch)."""

from typing import Any

from kora.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("scenarios", snakemake)
