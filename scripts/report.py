"""Snakemake entry point of the report rule: report.html and summary.json for a target."""

from typing import Any

from kora.report.rules import run_report_job

snakemake: Any  # injected by Snakemake's script: directive

run_report_job(snakemake)
