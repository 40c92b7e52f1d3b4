"""Any path works: a checkout whose path holds a space and letters beyond ASCII, reached
through a symlink, with its own virtualenv in it as the README sets one up. Such a
checkout failed every job with exit 127 (`bash: line 1: .../my: No such file or
directory`: Snakemake started a script job with the Python's path unquoted)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import orjson
import pytest
import yaml

from tests.helpers import copy_workflow
from tests.workflows import TINY


def checkout_with_a_virtualenv(where: Path) -> Path:
    """A copy of the workflow at `where` with a virtualenv of its own in `.venv` (this
    environment's packages, without installing them again); its Python."""
    copy_workflow(where)
    venv = where / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")
    ours = sysconfig.get_paths()["purelib"]  # .pth files and all, kora's editable install too
    (site / "this-environment.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return venv / "bin" / "python"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_run_bundle_and_replay_in_a_path_with_a_space_accents_and_a_symlink(
    tmp_path: Path,
) -> None:
    real = tmp_path / "my work" / "études" / "kora"
    real.mkdir(parents=True)
    checkout_with_a_virtualenv(real)
    (real / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    link = tmp_path / "lien vers kora"
    link.symlink_to(real, target_is_directory=True)
    python = str(link / ".venv" / "bin" / "python")  # the space is in the Python's path
    env = dict(os.environ, PYTHONUNBUFFERED="1")

    def run(*argv: str, cwd: Path = link) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [python, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=400
        )

    done = run("-m", "snakemake", "--cores", "2", "results/tiny/report.html",
               "--configfile", "tiny.yaml")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "No such file or directory" not in done.stderr
    results = orjson.loads((real / "results/tiny/results.json").read_bytes())
    assert results["tests"] > 0 and results["failedTests"] == 0
    # a bundle of it, and its replay (Snakemake again, in a folder of the bundle's own)
    made = run("-m", "kora.commands.main", "bundle", "tiny", "-o", "my bundle.zip",
               "--configfile", "tiny.yaml")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "`kora replay 'my bundle.zip'`" in made.stderr  # as it is to be typed
    again = run("-m", "kora.commands.main", "replay", "my bundle.zip", "--keep", "re play é")
    assert again.returncode == 0 and "identical" in again.stderr, again.stderr[-3000:]
