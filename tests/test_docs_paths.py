"""What a newcomer follows in README.md and docs/ is there: each relative link opens a file
(and, when it names one, a heading of that file), and each path of the project the text
names exists, unless it is a file a run makes or an example of something not yet written,
both listed below with the reason.

Paths are checked wherever the text names them, in code or in prose: a stale path is as
wrong in a sentence as in a code span. `<risk>`-style placeholders, `{wildcards}` and `*`
are globs that must match something.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import REPO

LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
# a path from the project's root: a known top folder (or a run's), or a top-level file
PATH = re.compile(
    r"(?<![\w./<>@-])("
    r"(?:kora|tests|bench|scripts|rules|config|data|docs|profiles|envs|\.ci"
    r"|results|results-v2|logs|\.kora)/[\w./<>*{}-]*"
    r"|Snakefile|config\.yaml|pyproject\.toml)(?![\w-])"
)

# Folders and files a run writes: no checkout has them, so naming them is not a mistake.
RUN_MADE = (
    "results/",  # per target: shards, results.json, report.html, summary.json, usage.json
    "results-v2/",  # the same for KORA v2 (its own results folder)
    "logs/",  # one log per job and stage
    ".kora/",  # call store, bill, limiter state, batches
    "data/seeds/",  # the seeds stage's shards (v1)
    "data/scenarios/",  # the scenarios stage's shards (v1), or `kora import-scenarios`'
    "data/v2/",  # KORA v2's seeds and scenarios
)
# Paths named as examples of what a reader would add: architecture.md's recipe for a new
# benchmark version.
EXAMPLES = {"kora/benchmarks/v3/", "data/taxonomy/v3/"}
# Paths that are not this project's, each allowed in the one page that means them.
ELSEWHERE = {
    # the reference implementation's own files, which the fidelity inventories cite
    ("fidelity.md", "data/risks.json"),
    ("fidelity.md", "data/motivations.json"),
    ("fidelity-v2.md", "data/risks.json"),
    ("fidelity-v2.md", "data/mechanisms.ts"),
    # the "was" column of fidelity.md's corrections records the tree at commit 6bdb210
    ("fidelity.md", "kora/stages/converse.py"),
    ("fidelity.md", "kora/stages/messages.py"),
}


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading (before duplicates get -1, -2, ...)."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        base = anchor = slug(heading)
        n = 0
        while anchor in found:
            n += 1
            anchor = f"{base}-{n}"
        found.add(anchor)
    return found


def broken_links(page: Path) -> list[str]:
    out = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z][a-z+.-]*:", target):  # a URL: not checked, tests reach no network
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            out.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            out.append(f"{target}: no heading #{anchor} in {file.name}")
    return out


def named_paths(text: str) -> list[str]:
    return [m.rstrip(".,:;") for m in PATH.findall(text)]


def allowed(page: str, path: str) -> bool:
    folder = path if path.endswith("/") else path + "/"
    return (
        folder.startswith(RUN_MADE)
        or folder in EXAMPLES
        or path in EXAMPLES
        or (page, path) in ELSEWHERE
    )


def exists(root: Path, path: str) -> bool:
    pattern = re.sub(r"<[^>/]*>|\{[^}/]*\}", "*", path).rstrip("/")
    if "*" in pattern:
        return any(root.glob(pattern))
    return (root / pattern).exists()


def missing_paths(root: Path, page: Path) -> list[str]:
    return [
        p
        for p in named_paths(page.read_text())
        if not allowed(page.name, p) and not exists(root, p)
    ]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_every_relative_link_opens_a_file_and_heading(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.timeout(30)
@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_every_project_path_named_exists(page: Path) -> None:
    assert missing_paths(REPO, page) == []


@pytest.mark.timeout(30)
def test_the_checks_see_what_they_must(tmp_path: Path) -> None:
    """The checks above pass on the real pages only if they would fail on a wrong one."""
    (tmp_path / "kora" / "run").mkdir(parents=True)
    (tmp_path / "kora" / "run" / "groups.py").touch()
    (tmp_path / "docs").mkdir()
    other = tmp_path / "docs" / "other.md"
    other.write_text("# Other\n\n## When a call fails\n\n```\n# not a heading\n```\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "[ok](other.md#when-a-call-fails) [ok](#a-page) [url](https://x.invalid/y)\n"
        "[gone](docs/other.md) [no heading](other.md#not-a-heading)\n\n# A page\n\n"
        "`kora/run/groups.py` and kora/run/gone.py, `kora/<pkg>/groups.py`,\n"
        "```\nkora/stages/old.py   a layout line\nresults/<target>/report.html\n```\n"
        "`kora/run/nothing/<x>.py`. The run writes logs/ and data/seeds/<risk>.jsonl.\n"
    )
    assert [b.split(":")[0] for b in broken_links(page)] == [
        "docs/other.md",
        "other.md#not-a-heading",
    ]
    assert missing_paths(tmp_path, page) == [
        "kora/run/gone.py",
        "kora/stages/old.py",
        "kora/run/nothing/<x>.py",
    ]


@pytest.mark.timeout(30)
def test_the_pages_name_the_tree() -> None:
    """A checker that matched nothing would pass everything: the pages do name paths."""
    named = {p for page in pages() for p in named_paths(page.read_text())}
    assert {
        "kora/run/workflow/risk_jobs.py",
        "rules/common.smk",
        "config.yaml",
        "Snakefile",
    } <= named
    assert len(named) > 100
