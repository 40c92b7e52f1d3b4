"""The `script:` of rule judgments: kora.run.broker.dispatch runs its job, in the broker or here."""

from typing import Any

from kora.run.broker.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("judgments", snakemake)
