"""Snakemake entry point of rule conversations: its job, run by kora.smk.conversations (see kora.dispatch)."""

from typing import Any

from kora.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("conversations", snakemake)
