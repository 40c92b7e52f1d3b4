"""A command that writes where its user says (`kora export --hf DIR`, `-o FILE`) replaces
only what kora wrote there: a file of the user's is named, kept, and nothing is written,
unless --force."""

from __future__ import annotations

from pathlib import Path

import pytest

from kora.commands.main import main as kora_main
from tests.helpers import REPO

PROMPTS = ["--taxonomy", str(REPO / "data" / "taxonomy"), "prompts"]
EXAMPLE = str(REPO / "docs" / "example-scenario.json")

# each command that writes a file its user names, with that file (`mine`) in its way
COMMANDS = {
    "export": (["export", "t", "--hf", "."], "README.md"),
    "bundle": (["bundle", "t", "-o", "mine.zip"], "mine.zip"),
    "aggregate": (["aggregate", "in", "-o", "mine.json"], "mine.json"),
    "prompts": ([*PROMPTS, EXAMPLE, "-o", "mine.md"], "mine.md"),
    "compare-targets": (["compare-targets", "a", "b", "-o", "mine.json"], "mine.json"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_users_file_in_the_way_is_named_and_kept(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, mine = COMMANDS[name]
    (tmp_path / ".kora").mkdir()  # a workspace, as a run leaves it
    (tmp_path / "results" / "t").mkdir(parents=True)  # its target's results
    monkeypatch.chdir(tmp_path)
    (tmp_path / mine).write_text("the user's own\n")
    assert kora_main(argv) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert f"kora: error: {mine}: not written by kora" in said
    assert "--force to replace it" in said
    assert (tmp_path / mine).read_text() == "the user's own\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".kora", mine, "results"]  # no more


@pytest.mark.timeout(60)
def test_a_file_kora_wrote_is_written_again_and_one_changed_since_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".kora").mkdir()  # a workspace, as a run leaves it
    (tmp_path / "results" / "t").mkdir(parents=True)  # its target's results
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "prompts.md"
    out.write_text("the user's own\n")
    again = [*PROMPTS, EXAMPLE, "-o", "prompts.md"]
    assert kora_main([*again, "--force"]) == 0
    written = out.read_text()
    assert written.startswith("#") and "the user's own" not in written
    assert kora_main(again) == 0  # kora's own file: replaced without a word
    assert out.read_text() == written
    out.write_text(written + "a note of the user's\n")
    assert kora_main(again) == 2
    assert "prompts.md: not written by kora (or changed since it was)" in capsys.readouterr().err
    assert out.read_text().endswith("a note of the user's\n")
