"""kora.run.seam reads Snakemake's internals: each reader, run by the installed Snakemake
in a workflow of its own, gives what the Snakefile relies on (a Snakemake that changes
one fails here, not in the middle of a run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers import copy_workflow
from tests.workflows import TINY, snakemake

SNAKEFILE = """
from kora.run import seam

print("OVERLAYS", seam.overlays(workflow), flush=True)


configfile: "base.yaml"


rule all:
    input:
        "a.txt",
        "b.txt",


rule make:
    output:
        "{name}.txt",
    shell:
        "touch {output}"


onstart:
    jobs = [seam.job_parts(j) for j in seam.jobs_to_run(workflow)]
    print("JOBS", sorted((n, wc.get("name", "")) for n, wc, *_ in jobs), flush=True)
    print("LOCAL", seam.runs_locally(workflow), flush=True)
    print("ISOLATED", seam.isolated_software(workflow), flush=True)
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_each_reader_works_with_the_installed_snakemake(tmp_path: Path) -> None:
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    (tmp_path / "base.yaml").write_text("x: 1\n")
    (tmp_path / "extra.yaml").write_text("y: 2\n")
    done = snakemake(tmp_path, cores=1, configfile="extra.yaml", timeout=280)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "OVERLAYS ['extra.yaml']" in out or f"OVERLAYS ['{tmp_path}/extra.yaml']" in out
    assert "JOBS [('all', ''), ('make', 'a'), ('make', 'b')]" in out
    assert "LOCAL True" in out
    assert "ISOLATED False" in out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_file_of_no_target_or_of_another_version_is_named_as_such(tmp_path: Path) -> None:
    copy_workflow(tmp_path)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    nobody = snakemake(tmp_path, "results/nobody/results.json")
    assert nobody.returncode != 0
    assert "no target 'nobody' in the config (targets: tiny" in " ".join(nobody.stderr.split())
    other = snakemake(tmp_path, "results-v2/tiny/report.html")
    assert other.returncode != 0
    said = " ".join(other.stderr.split())
    assert "results-v2/ holds KORA v2 results, but this run's config is KORA v1" in said
