"""The `script:` of rule report: kora.run.broker.dispatch runs its job, in the broker or here."""

from typing import Any

from kora.run.broker.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("report", snakemake)
