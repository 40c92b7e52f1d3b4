"""Every `kora.x.y` name the project's text gives, in a comment, a docstring, a page of
docs/ or a rule, is a module of the package or an attribute of one. Code that names a
moved module fails on its own; a comment or a page that does only misleads its reader,
and nothing else reads them.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import REPO

ROOTS = ("kora", "scripts", "rules", "tests", "bench", "docs", "config", "profiles", ".ci")
TOP_FILES = ("README.md", "Snakefile", "config.yaml", "pyproject.toml")
SUFFIXES = {".py", ".md", ".smk", ".yaml", ".toml", ".jinja", ".js", ".sh"}
# after a slash or a dot it is part of a path or a longer name (envs/kora.yaml, a.kora.b)
NAME = re.compile(r"(?<![\w/.@-])kora(?:\.[A-Za-z_]\w*)+")
# names that start with `kora.` and are not the package's, with what they are
NOT_OURS = {
    "kora.ts": "the reference implementation's main source, cited by the fidelity pages",
    "kora.generateScenarioSeeds": "a function of that source",
    "kora.yaml": "the conda environment's file name (envs/kora.yaml)",
    # tests/test_recipes.py adds these to a copy of the package, as the recipes say
    "kora.llm.echo": "the toy provider's module, in the recipes test's copy",
    "kora.run.stages.echoes": "the toy stage's module, in the recipes test's copy",
}


def texts() -> list[Path]:
    found = [REPO / name for name in TOP_FILES]
    for root in ROOTS:
        found += [
            p
            for p in sorted((REPO / root).rglob("*"))
            if p.suffix in SUFFIXES and p.is_file() and "__pycache__" not in p.parts
        ]
    # this file names stale modules on purpose, to show they are caught
    return [p for p in found if p != Path(__file__).resolve()]


def _module(name: str) -> tuple[ModuleType, list[str]] | None:
    """The longest leading part of `name` that imports, and the rest."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        dotted = ".".join(parts[:i])
        try:
            return importlib.import_module(dotted), parts[i:]
        except ModuleNotFoundError as exc:
            # a dependency missing, not a wrong name: say so
            if exc.name is None or not f"{dotted}.".startswith(f"{exc.name}."):
                raise
    return None


def resolves(name: str) -> bool:
    found = _module(name)
    if found is None:
        return False
    obj: object = found[0]
    for attr in found[1]:
        if hasattr(obj, attr):
            obj = getattr(obj, attr)
        elif isinstance(obj, type):
            # a dataclass or pydantic field without a class-level value: annotated only;
            # what it holds is not known without an instance, so the rest is not checked
            return any(attr in vars(k).get("__annotations__", {}) for k in obj.__mro__)
        else:
            return False
    return True


def unresolved(path: Path, root: Path = REPO) -> list[str]:
    out = []
    for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        for name in NAME.findall(line):
            if name not in NOT_OURS and not resolves(name):
                out.append(f"{path.relative_to(root)}:{lineno}: {name}")
    return out


@pytest.mark.timeout(120)
def test_every_dotted_kora_name_is_a_module_or_attribute() -> None:
    assert [bad for path in texts() for bad in unresolved(path)] == []


@pytest.mark.timeout(60)
def test_the_check_tells_a_stale_name_from_a_live_one(tmp_path: Path) -> None:
    page = tmp_path / "probe.md"
    page.write_text(
        "kora.run.workflow.risk_jobs.split and kora.llm.base.FinishReason hold;\n"
        "a field: kora.benchmarks.outcomes.TargetTurn.finishReason;\n"
        "moved: kora.benchmarks.schemas.TargetTurn, kora.run.nowhere.thing;\n"
        "not names: envs/kora.yaml, korabench.ai, kora.ts:224.\n"
    )
    assert unresolved(page, tmp_path) == [
        "probe.md:3: kora.benchmarks.schemas.TargetTurn",
        "probe.md:3: kora.run.nowhere.thing",
    ]


@pytest.mark.timeout(60)
def test_the_scan_reads_comments_and_pages() -> None:
    """A scan that found nothing would pass: it reads the rules, scripts and docs too."""
    names = {
        str(p.relative_to(REPO)) for p in texts() if NAME.search(p.read_text(errors="replace"))
    }
    assert {"rules/common.smk", "Snakefile", "docs/architecture.md", "scripts/seeds.py"} <= names
    assert len(names) > 100
