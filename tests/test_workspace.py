"""Every `kora` command finds its workspace from any folder inside it, as git finds its
repository, or says in one line that it found none; the paths typed on its command line
stay relative to the folder they were typed in. And `kora usage --runs` says of each run
when it started and ended, what it made, the command that ran it and how it ended."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from kora.commands.main import main
from kora.llm.base import Response
from kora.llm.money.bill import OUTSIDE, BillWriter
from tests.helpers import REPO, copy_workflow
from tests.workflows import TINY, command, snakemake

DEMO = {"models": {"mock": {"provider": "mock"}}, **yaml.safe_load(
    (REPO / "config/demo.yaml").read_text()
)}  # fmt: skip


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of the project with the demo's overlay and a bill of three calls."""
    ws = tmp_path / "ws"
    ws.mkdir()
    copy_workflow(ws)
    (ws / "demo.yaml").write_text(yaml.safe_dump(DEMO))
    writer = BillWriter(ws / ".kora/bill", OUTSIDE)
    for _ in range(3):
        writer.charge("mock", "judge_safety", Response("", 100, 10), None)
    writer.close()
    return ws


def kora(cwd: Path, line: str) -> tuple[int, str, str]:
    done = command(cwd, f"kora {line}")
    return done.returncode, done.stdout, done.stderr


@pytest.mark.timeout(120)
def test_kora_usage_from_any_folder_inside_the_workspace_reads_its_bill(workspace: Path) -> None:
    deep = workspace / "results" / "somewhere"
    deep.mkdir(parents=True)
    # profiles/default holds a Snakemake profile's config.yaml: not a workspace of its own
    for where in (workspace, deep, workspace / "profiles" / "default"):
        status, out, err = kora(where, "usage --json")
        assert status == 0, err
        assert json.loads(out)["billed"]["calls"] == 3, where


@pytest.mark.timeout(120)
def test_kora_plan_and_check_config_from_a_subfolder_are_the_workspaces(workspace: Path) -> None:
    sub = workspace / "data"
    status, at_root, err = kora(workspace, "plan mock-target --configfile demo.yaml")
    assert status == 0, err
    status, below, err = kora(sub, "plan mock-target --configfile ../demo.yaml")
    assert status == 0, err
    assert below == at_root
    # a target written after --configfile is still a target, not a file of the subfolder
    status, below, err = kora(sub, "plan --configfile ../demo.yaml mock-target")
    assert status == 0 and below == at_root, err
    status, _, err = kora(sub, "check-config --configfile ../demo.yaml")
    assert status == 0 and "config OK" in err, err


@pytest.mark.timeout(120)
def test_paths_typed_in_a_subfolder_are_read_and_written_there(workspace: Path) -> None:
    sub = workspace / "notes"
    sub.mkdir()
    shutil.copy(REPO / "docs/example-scenario.json", sub / "scenario.json")
    status, _, err = kora(sub, "prompts scenario.json -o prompts.md")
    assert status == 0, err
    assert "## " in (sub / "prompts.md").read_text()
    assert not (workspace / "prompts.md").exists()
    # a command it prints to type next goes to the workspace first
    status, _, err = kora(sub, "export mock-target --hf out --configfile ../demo.yaml")
    assert status != 0
    assert "`cd .. && snakemake --cores 2 results/mock-target/" in err, err
    assert "--configfile demo.yaml`" in err, err


# each command, with arguments it accepts, run outside any workspace
NEEDS_ONE = {
    "usage": ["usage"],
    "plan": ["plan"],
    "check-config": ["check-config"],
    "ping": ["ping"],
    "prompts": ["prompts", "s.json"],
    "import-scenarios": ["import-scenarios", "s.jsonl"],
    "import-conversations": ["import-conversations", "c.jsonl"],
    "continue": ["continue", "c.jsonl"],
    "annotate": ["annotate", "t"],
    "agreement": ["agreement", "t"],
    "bundle": ["bundle", "t", "-o", "t.zip"],
    "export": ["export", "t", "--hf", "out"],
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(NEEDS_ONE))
def test_outside_any_workspace_a_command_says_it_found_none(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    here = tmp_path / "elsewhere"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(NEEDS_ONE[name]) != 0
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"kora: error: no KORA workspace in {here} or any folder above it (looked for a "
        "Snakefile, a .kora folder or config.yaml)"
    ]
    assert list(here.iterdir()) == []  # nothing written there


def test_every_command_is_either_tried_outside_or_runs_on_named_files_alone() -> None:
    from kora.commands.common import ANYWHERE
    from kora.commands.main import build_parser

    parser = build_parser()
    names = set(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert names == set(NEEDS_ONE) | ANYWHERE


# the options of the commands that name no file (the rest are in PATHS or PATHS_OR_NAMES,
# to be read from where they were typed)
NAMES = {"target", "targets", "risk_ids", "target_models", "annotator", "criteria", "since"}
NAMES |= {"config"}  # check-config --config KEY=VALUE


def test_every_option_that_can_name_a_file_is_read_from_where_it_was_typed() -> None:
    from kora.commands.common import PATHS, PATHS_OR_NAMES
    from kora.commands.main import build_parser

    parser = build_parser()
    for name, sub in parser._subparsers._group_actions[0].choices.items():  # type: ignore[union-attr]
        for action in sub._actions:
            takes_text = action.nargs != 0 and action.type is None and action.choices is None
            if takes_text and action.dest != "help":
                assert action.dest in PATHS | PATHS_OR_NAMES | NAMES, (name, action.dest)


@pytest.mark.timeout(120)
def test_kora_usage_runs_prints_calls_outside_a_run(workspace: Path) -> None:
    """The fixture's calls were made outside a run (as kora ping's): no record of a run,
    their times stand in for it."""
    status, out, err = kora(workspace, "usage --runs")
    assert status == 0, err
    runs = out[out.index("runs, oldest first:") :].splitlines()
    assert re.fullmatch(
        r"  outside-a-run  calls from \d{4}-\d\d-\d\d \d\d:\d\d:\d\d to "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d; no record of a run \(calls outside one, such as "
        r"kora ping's\)",
        runs[1],
    ), runs
    assert runs[2].startswith("    billed: 3 calls, 300 input and 30 output tokens")
    row = json.loads(kora(workspace, "usage --runs --json")[1])["byRun"][0]
    assert (row["name"], row["started"], row["outcome"]) == (OUTSIDE, None, None)


@pytest.mark.timeout(120)
def test_kora_usage_runs_names_pings_calls_and_lists_a_run_that_paid_nothing(
    workspace: Path,
) -> None:
    """`kora ping`'s calls were shown as a run of an older kora, and a recorded run that
    paid for no call (every answer from the call store) was left out."""
    from kora.llm.money.bill import record_run

    ping = BillWriter(workspace / ".kora/bill", "ping")  # as kora ping writes its calls
    ping.charge("mock", "ping", Response("", 7, 1), None)
    ping.close()
    when = {"started": 1.7e9, "ended": 1.7e9 + 5, "outcome": "finished"}
    record_run(workspace / ".kora/bill", "r0", targets=["t"], command="snakemake x", **when)
    status, out, err = kora(workspace, "usage --runs")
    assert status == 0, err
    runs = out[out.index("runs, oldest first:") :].splitlines()
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    assert re.fullmatch(rf"  r0  {stamp} to {stamp}, finished", runs[1]), runs
    assert runs[2:5] == ["    targets: t", "    command: snakemake x",
                         "    billed: 0 calls, 0 input and 0 output tokens, $0.0000"]  # fmt: skip
    pinged = next(i for i, line in enumerate(runs) if line.startswith("  kora ping "))
    assert re.fullmatch(rf"  kora ping  calls from {stamp} to {stamp}", runs[pinged]), runs
    assert runs[pinged + 1].startswith("    billed: 1 calls, 7 input")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_kora_usage_runs_says_when_a_run_began_and_ended_what_it_made_and_how(
    workspace: Path,
) -> None:
    (workspace / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    done = snakemake(workspace, "results/tiny/results.json")
    assert done.returncode == 0, done.stderr[-3000:]
    status, out, err = kora(workspace / "results", "usage --runs")
    assert status == 0, err
    runs = out[out.index("runs, oldest first:") :].splitlines()
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    assert re.fullmatch(rf"  [0-9a-f]{{12}}  {when} to {when}, finished", runs[3]), runs
    assert runs[4:6] == [
        "    targets: tiny",
        "    command: snakemake --cores 2 results/tiny/results.json --configfile tiny.yaml",
    ]
    assert runs[6].startswith("    billed: ")
    row = json.loads(kora(workspace, "usage --runs --json")[1])["byRun"][1]
    assert row["outcome"] == "finished" and row["targets"] == ["tiny"]
    assert row["started"] <= row["first_call"] <= row["last_call"] <= row["ended"]
