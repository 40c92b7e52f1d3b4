"""The README's commands run as written: every ```bash block (those needing no API key)
in a fresh copy of the project, in order, each must succeed; and the figures the README
quotes for the demo are the ones `kora plan` gives."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, copy_workflow

BLOCK = re.compile(r"^```bash\n(.*?)^```$", re.M | re.S)


def blocks() -> list[str]:
    return BLOCK.findall((REPO / "README.md").read_text())


@pytest.mark.timeout(30)
def test_the_runnable_blocks_need_no_key() -> None:
    found = blocks()
    assert len(found) >= 3
    for block in found:
        assert "API_KEY" not in block and "pip install" not in block, block


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_runnable_block_of_the_readme_succeeds(tmp_path: Path) -> None:
    copy_workflow(tmp_path)
    for name in ("config", "docs"):
        shutil.copytree(REPO / name, tmp_path / name, dirs_exist_ok=True)
    shutil.copytree(REPO / "data" / "examples", tmp_path / "data" / "examples")
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    outputs = []
    for block in blocks():
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=1200)  # fmt: skip
        assert done.returncode == 0, f"{block}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        outputs.append(done.stdout + done.stderr)
    # the demo's figures as the README quotes them
    readme = (REPO / "README.md").read_text()
    calls, repeated = re.search(
        r"the calls the run will make \((\d+), of which (\d+)", readme
    ).groups()
    total = next(line for line in outputs[0].splitlines() if line.startswith("total")).split()
    assert (total[1], total[3]) == (calls, repeated)
