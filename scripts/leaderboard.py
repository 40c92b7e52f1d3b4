"""Snakemake entry point of the leaderboard rule: leaderboard.html/.json across targets."""

from typing import Any

from kora.report.rules import run_leaderboard_job

snakemake: Any  # injected by Snakemake's script: directive

run_leaderboard_job(snakemake)
