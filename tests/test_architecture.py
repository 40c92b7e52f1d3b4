"""The architecture stays as docs/architecture.md draws it: what a benchmark version is
lives in kora/benchmarks only, a file's name in its layout only, modules stay small, the
layers hold (import-linter)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

# a version's name compared or spelled out as a value; kora/benchmarks is the one place
# that may say which version is which
VERSION_NAME = re.compile(r"""["']v[0-9]+["']|benchmark\s*[!=]=|is_v[0-9]""")
MAX_LINES = 400
# a provider told by its address, or a model by its name: facts of the provider table
PROVIDER_FACT = re.compile(r"""api\.[a-z]+\.com|["'](haiku|sonnet|opus|gpt-[\w.-]*)["']""")


def _sources() -> list[Path]:
    out = [p for p in (REPO / "kora").rglob("*") if p.suffix in {".py", ".jinja", ".js"}]
    out += [*(REPO / "rules").glob("*.smk"), REPO / "Snakefile", *(REPO / "scripts").glob("*.py")]
    return sorted(out)


@pytest.mark.timeout(30)
def test_no_version_name_is_compared_outside_the_benchmarks() -> None:
    found = [
        f"{p.relative_to(REPO)}:{n}: {line.strip()}"
        for p in _sources()
        if not p.is_relative_to(REPO / "kora" / "benchmarks")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if VERSION_NAME.search(line)
    ]
    assert not found, "ask the run's Benchmark instead:\n" + "\n".join(found)


@pytest.mark.timeout(30)
def test_the_check_finds_a_comparison() -> None:
    assert VERSION_NAME.search('if config.benchmark == "v2":')
    assert VERSION_NAME.search("kind = 'v1'")
    assert not VERSION_NAME.search("benchmarks.get(name)")


@pytest.mark.timeout(30)
def test_provider_facts_are_only_in_the_provider_table() -> None:
    table = REPO / "kora" / "llm" / "registry.py"
    found = [
        f"{p.relative_to(REPO)}:{n}: {line.strip()}"
        for p in _sources()
        if p != table
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if PROVIDER_FACT.search(line)
    ]
    assert not found, "ask the model's ProviderKind (kora/llm/registry.py):\n" + "\n".join(found)


# a file name of a result or of a shard's companions, or the workspace's own folder, as a
# value: kora/benchmarks/layout.py is the one place that spells them (the model layer's
# call store keeps files of its own)
PATH_FACT = re.compile(
    r"""(["'])((results|usage|summary|manifest|agreement|IMPORTED|RECORDED)\.json"""
    r"""|report\.html|conversations\.parquet|[*\w/.-]*\.(status\.json|rejected\.jsonl)"""
    r"""|\.kora(/[\w/]*)?)\1"""
)


@pytest.mark.timeout(30)
def test_file_names_and_the_workspace_folder_are_spelt_only_in_the_layout() -> None:
    found = [
        f"{p.relative_to(REPO)}:{n}: {line.strip()}"
        for p in _sources()
        if p.suffix != ".jinja" and p != REPO / "kora" / "benchmarks" / "layout.py"
        and not p.is_relative_to(REPO / "kora" / "llm")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if PATH_FACT.search(line)
    ]  # fmt: skip
    assert not found, "name it from kora.benchmarks.layout:\n" + "\n".join(found)


@pytest.mark.timeout(30)
def test_no_module_is_over_400_lines() -> None:
    long = [
        f"{p.relative_to(REPO)}: {n} lines"
        for p in sorted((REPO / "kora").rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    ]
    assert not long, "\n".join(long)


@pytest.mark.timeout(30)
def test_no_folder_holds_over_20_modules() -> None:
    """A folder a reader can take in at once: past 20 modules it splits by responsibility,
    as kora/run/ and kora/llm/ did (docs/architecture.md, "Layers")."""
    crowded = {
        str(d.relative_to(REPO)): n
        for d in [REPO / "kora", *(REPO / "kora").rglob("*/")]
        if d.name != "__pycache__"
        and (n := len([p for p in d.glob("*.py") if p.name != "__init__.py"])) > 20
    }
    assert not crowded, crowded


@pytest.mark.timeout(120)
def test_the_import_contracts_hold() -> None:
    """Layers, independent versions, no import circle (pyproject.toml, [tool.importlinter])."""
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    done = subprocess.run([exe], cwd=REPO, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
