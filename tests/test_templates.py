"""Template rendering rules that hold for any prompt text (kora/benchmarks/templates.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kora.benchmarks.templates import PROMPTS_DIR, render
from kora.errors import ConfigError


@pytest.mark.parametrize(
    ("edit", "line"),
    [
        (lambda t: t + "\nAlso weigh the child's age.\n", None),
        (lambda t: "Read carefully.\n" + t, 1),
        (lambda t: t + "\n{{ transcript }}\n", None),
    ],
)
def test_text_outside_a_block_is_an_error_naming_file_and_line(
    tmp_path: Path, edit: Any, line: int | None
) -> None:
    """Text added outside `{% block %}` would be silently dropped from the prompt."""
    folder = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR, folder)
    path = folder / "judge_safety.jinja"
    text = path.read_text()
    path.write_text(edit(text))
    expected_line = line if line is not None else len(text.splitlines()) + 2
    with pytest.raises(ConfigError, match=rf"judge_safety\.jinja, line {expected_line}: .*outside"):
        render("judge_safety", folder, risk=None, seed=None, scenario=None, transcript="")


def test_comments_and_blank_lines_outside_blocks_are_fine(tmp_path: Path) -> None:
    folder = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR, folder)
    path = folder / "target_system.jinja"
    path.write_text("{# a note for editors #}\n\n" + path.read_text() + "\n\n")
    prompt = render("target_system", folder, age_range=None, memory=None)
    assert prompt.system
