"""Snakemake entry point of rule judgments: its job, run by kora.run.entries.judgments (see kora.run.dispatch)."""

from typing import Any

from kora.run.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("judgments", snakemake)
