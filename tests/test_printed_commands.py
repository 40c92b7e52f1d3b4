"""Every command the tool prints for the user to run next runs as printed: with the config
files the run used, the targets before `--configfile` (which takes every value after it).
The config files' headers name the paths their own config makes; a target typed after
`--configfile` is named as such, with the command to type instead; `kora plan --detect`
prints its answer and nothing else."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from kora.run.workflow.pipeline import Pipeline
from kora.run.workflow.unknown_files import unknown_request
from tests.helpers import REPO, copy_workflow
from tests.workflows import TINY, command, snakemake

# a printed command: after a colon or an opening bracket, to the end of its line (or the
# closing bracket)
_PRINTED = re.compile(r"(?:: |\()((?:snakemake|kora) [^()\n`]*?)\)?$", re.M)


def printed(output: str, start: str = "snakemake") -> list[str]:
    return [c for c in _PRINTED.findall(output) if c.startswith(start)]


def project(tmp_path: Path) -> Path:
    copy_workflow(tmp_path)
    shutil.copytree(REPO / "config", tmp_path / "config")
    shutil.copytree(REPO / "data" / "examples", tmp_path / "data" / "examples")
    return tmp_path


@pytest.mark.timeout(120)
def test_import_conversations_prints_the_readmes_next_command(tmp_path: Path) -> None:
    """After the README's import, the command the tool says to run is the README's next
    line, word for word (the demo's `--cores 2`)."""
    readme = (REPO / "README.md").read_text()
    imported, judge = (
        line
        for line in readme.splitlines()
        if line.startswith(("kora import-conversations ", "snakemake --cores 2 results/recorded"))
    )
    step = command(project(tmp_path), imported)
    assert step.returncode == 0, step.stderr
    assert printed(step.stderr) == [judge]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_readme_recorded_conversations_run_as_printed(tmp_path: Path) -> None:
    """The README's recorded conversations: import, then each command the tool prints,
    as printed, to the report."""
    workdir = project(tmp_path)
    files = "--configfile config/demo.yaml config/recorded.yaml"
    step = command(workdir, f"kora import-conversations data/examples/recorded.jsonl {files}")
    assert step.returncode == 0, step.stderr
    (judge,) = printed(step.stderr)
    assert judge.endswith(files)
    step = command(workdir, judge)
    assert step.returncode == 0, step.stderr[-3000:]
    assert (workdir / "results/recorded-bot/results.json").exists()
    (report,) = printed(step.stderr)
    assert "report.html" in report and report.endswith(files)
    step = command(workdir, report)
    assert step.returncode == 0, step.stderr[-3000:]
    assert (workdir / "results/recorded-bot/report.html").exists()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_target_typed_after_configfile_is_named_and_the_fix_runs(tmp_path: Path) -> None:
    copy_workflow(tmp_path)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    first = snakemake(tmp_path, "results/tiny/results.json")
    assert first.returncode == 0, first.stderr[-3000:]
    (report,) = printed(first.stderr)  # the closing line's command for the report
    assert report == "snakemake --cores 2 results/tiny/report.html --configfile tiny.yaml"
    # typed the other way round, the results file is read as a config file
    wrong = command(
        tmp_path, "snakemake --cores 2 --configfile tiny.yaml results/tiny/results.json"
    )
    out = wrong.stdout + wrong.stderr
    assert wrong.returncode != 0
    assert "results/tiny/results.json: a file the run makes, read as a config file" in out
    (fix,) = printed(out)
    assert fix == "snakemake --cores 2 results/tiny/results.json --configfile tiny.yaml"
    again = command(tmp_path, fix)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    done = command(tmp_path, report)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "results/tiny/report.html").exists()


def header_commands() -> list[tuple[str, str]]:
    found = []
    for path in sorted((REPO / "config").glob("*.yaml")):
        for line in path.read_text().splitlines():
            if not line.startswith("#"):
                break
            text = line.lstrip("# ").strip()
            if text.startswith(("snakemake ", "kora ")):
                found.append((path.name, text))
    return found


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("name", "line"), header_commands())
def test_the_config_headers_commands_name_what_their_config_makes(name: str, line: str) -> None:
    """Each shipped overlay's header shows how to run it: the files it names exist, the
    config they make loads, and each target path is one that config makes."""
    words = shlex.split(line)
    assert "--configfile" in words, line
    at = words.index("--configfile")
    files, before = words[at + 1 :], words[:at]
    assert f"config/{name}" in files, line
    for f in files:
        assert (REPO / f).exists(), f"{name}: {f} named in its header does not exist"
    pipeline = Pipeline.load(files, REPO)
    if words[0] == "snakemake":
        targets = [w for w in before[1:] if "/" in w]
        assert unknown_request(pipeline, targets) is None, line
        for t in targets:
            assert t.startswith(f"{pipeline.layout.results}/"), f"{name}: {t} ({line})"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_plan_detect_prints_its_answer_alone(tmp_path: Path) -> None:
    """The plan plays the mock through the scenarios the run would make: a seed its
    validator rejects is the run's to report, not a line inside the plan's answer."""
    workdir = project(tmp_path)
    files = "--configfile config/demo.yaml config/demo-pair.yaml"
    done = command(workdir, f"kora plan mock-target --detect 0.05 --against mock-b-target {files}")
    assert done.returncode == 0, done.stderr
    out = done.stdout + done.stderr
    assert "seeds_per_task: 36" in out  # enough seeds that the mock rejects some
    assert "Scenario validation failed" not in out, out
    assert "that run from scratch" in out
