"""A checkout runs its own kora package. In a second clone used with the first clone's
virtualenv, `kora plan` ran the first clone's code and templates and counted 0 calls,
while the run (Snakemake imports the package beside its Snakefile) paid 93. Now a `kora`
command, or a run, given another checkout's package stops before any call, naming it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kora.commands.main import main as kora_main
from tests.helpers import REPO, copy_workflow
from tests.workflows import TINY, snakemake


def second_clone(where: Path) -> Path:
    """A checkout of its own at `where` (its Snakefile, rules and kora/ package), while
    this environment's kora is the repository's."""
    copy_workflow(where)
    shutil.copytree(REPO / "kora", where / "kora", ignore=shutil.ignore_patterns("__pycache__"))
    (where / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    return where


@pytest.mark.timeout(60)
def test_a_kora_command_in_another_checkout_stops_naming_the_package_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(second_clone(tmp_path))
    assert kora_main(["plan", "tiny", "--configfile", "tiny.yaml"]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert f"Python runs the kora package in {REPO / 'kora'}, not this one's" in said
    assert "pip install -e" in said


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_run_in_another_checkout_stops_before_any_call(tmp_path: Path) -> None:
    """Snakemake imports the package beside the Snakefile it reads: the repository's
    Snakefile run in the second clone's folder would run the repository's code on the
    clone's templates and data."""
    clone = second_clone(tmp_path)
    done = snakemake(clone, "-s", str(REPO / "Snakefile"), "results/tiny/results.json")
    assert done.returncode != 0
    said = " ".join(done.stderr.split())
    assert f"Python runs the kora package in {REPO / 'kora'}, not this one's" in said
    assert not (clone / ".kora").exists()  # no call made, nothing stored, nothing billed
    assert "Traceback" not in done.stderr


@pytest.mark.timeout(60)
def test_the_checkout_of_the_package_in_use_runs(tmp_path: Path) -> None:
    """A symlink to the checkout is the same checkout."""
    link = tmp_path / "link"
    link.symlink_to(REPO, target_is_directory=True)
    done = subprocess.run(
        ["kora", "check-config"], cwd=link, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr
