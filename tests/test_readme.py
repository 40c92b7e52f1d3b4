"""The README's commands run as written: every ```bash block (those needing no API key)
in a fresh copy of the project, in order, each must succeed; and the counts the README and
docs/ quote (cells, shards, seeds, tests, calls) are the ones the program prints. Timings
are not checked here: the pages date them and name the bench/ command that measures them."""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, copy_workflow, upstream

BLOCK = re.compile(r"^```bash\n(.*?)^```$", re.M | re.S)


def blocks() -> list[str]:
    return BLOCK.findall((REPO / "README.md").read_text())


def fresh_copy(dest: Path) -> Path:
    """The project as a new clone has it: the workflow, config/, docs/ and the examples."""
    copy_workflow(dest)
    for name in ("config", "docs"):
        shutil.copytree(REPO / name, dest / name, dirs_exist_ok=True)
    shutil.copytree(REPO / "data" / "examples", dest / "data" / "examples")
    return dest


def without_keys() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    return env


DEMO_PLAN = "kora plan mock-target --configfile config/demo.yaml"
# Each count a page quotes, and the command whose output gives it in a fresh copy: (page,
# the page's words, the command, its output's words), the two patterns' groups the same
# numbers in the same order. {scenarios} is the reference's v2 scenario file.
QUOTED = [
    ("README.md", r"a grid of (\d+) cells \((\d+) shards", DEMO_PLAN,
     r"(\d+) cells of the grid \(.*\), (\d+) shards"),
    ("README.md", r"the calls the run will make \((\d+), of which (\d+)", DEMO_PLAN,
     r"^total +(\d+) +\d+ +(\d+)"),
    ("docs/kora-v2.md", r"`kora plan`: (\d+) seeds, (\d+) calls",
     "kora plan mock-target --configfile config/demo-v2.yaml",
     r"^seeds +(\d+)(?s:.*)^total +(\d+)"),
    ("docs/kora-v2.md", r"([\d,]+) scenarios, ([\d,]+) tests, ([\d,]+) calls",
     "kora import-scenarios {scenarios} --configfile config/mock-v2.yaml && "
     "kora plan mock-target --configfile config/mock-v2.yaml",
     r"imported (\d+) scenarios(?s:.*)^conversations +(\d+)(?s:.*)^total +(\d+)"),
]  # fmt: skip


def numbers(pattern: str, text: str, where: str) -> tuple[int, ...]:
    found = re.search(pattern, text, re.M)
    assert found, f"{where} does not say {pattern!r}:\n{text[-2000:]}"
    return tuple(int(g.replace(",", "")) for g in found.groups())


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("page", "says", "command", "prints"), QUOTED, ids=["grid", "calls", "v2-demo", "v2-shipped"]
)
def test_the_counts_the_pages_quote_are_the_programs(
    tmp_path: Path, page: str, says: str, command: str, prints: str
) -> None:
    if "{scenarios}" in command:
        command = command.format(scenarios=shlex.quote(str(upstream("v2/data/scenarios.jsonl"))))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=fresh_copy(tmp_path),
                          env=without_keys(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=100)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    quoted = numbers(says, " ".join((REPO / page).read_text().split()), page)
    assert numbers(prints, done.stdout, command) == quoted


@pytest.mark.timeout(30)
def test_the_runnable_blocks_need_no_key() -> None:
    found = blocks()
    assert len(found) >= 3
    for block in found:
        assert "API_KEY" not in block and "pip install" not in block, block


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_runnable_block_of_the_readme_succeeds(tmp_path: Path) -> None:
    fresh_copy(tmp_path)
    outputs = []
    for block in blocks():
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path,
                              env=without_keys(), capture_output=True, text=True,
                              timeout=1200)  # fmt: skip
        assert done.returncode == 0, f"{block}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        outputs.append(done.stdout + done.stderr)
    # the demo run makes the calls and shards its plan announced, as the README says
    readme = " ".join((REPO / "README.md").read_text().split())
    _, shards = numbers(QUOTED[0][1], readme, "README.md")
    calls, _ = numbers(QUOTED[1][1], readme, "README.md")
    progress = [line for line in outputs[0].splitlines() if line.startswith("[kora] calls")]
    assert f"calls {calls:,} of {calls:,} answered (100%)" in progress[-1], progress[-1]
    assert f"shards {shards} of {shards} done" in progress[-1], progress[-1]
    # the report names each scenario the mock's validator rejected, with the reason
    report = html.unescape((tmp_path / "results/mock-target/report.html").read_text())
    rejected = [r for f in tmp_path.glob("data/scenarios/**/*.rejected.jsonl")
                for r in map(json.loads, f.read_text().splitlines())]  # fmt: skip
    assert rejected, "the demo's mock no longer rejects a scenario: the check below sees nothing"
    for r in rejected:
        assert r["seed"]["id"] in report and r["lastReasons"][:60] in report
