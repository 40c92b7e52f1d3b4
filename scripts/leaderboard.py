"""Snakemake entry point of rule leaderboard: its job, run by kora.smk.leaderboard (see kora.dispatch)."""

from typing import Any

from kora.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("leaderboard", snakemake)
