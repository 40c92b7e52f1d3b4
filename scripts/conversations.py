"""Snakemake entry point of rule conversations: its job, run by kora.run.entries.conversations (see kora.run.dispatch)."""

from typing import Any

from kora.run.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("conversations", snakemake)
