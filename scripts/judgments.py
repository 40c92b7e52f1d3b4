"""Snakemake entry point of rule judgments: its job, run by kora.smk.judgments (see kora.dispatch)."""

from typing import Any

from kora.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("judgments", snakemake)
