"""Snakemake entry point of rule scenarios: its job, run by kora.run.entries.scenarios (see kora.run.dispatch)."""

from typing import Any

from kora.run.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("scenarios", snakemake)
