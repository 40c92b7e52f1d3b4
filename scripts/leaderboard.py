"""Snakemake entry point of rule leaderboard: its job, run by kora.run.entries.leaderboard (see kora.run.dispatch)."""

from typing import Any

from kora.run.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("leaderboard", snakemake)
