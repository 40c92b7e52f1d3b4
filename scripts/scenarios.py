"""The `script:` of rule scenarios: kora.run.dispatch runs its job, in the broker or here."""

from typing import Any

from kora.run.dispatch import run

snakemake: Any  # injected by Snakemake's script: directive

run("scenarios", snakemake)
