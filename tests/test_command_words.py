"""What a `kora` command says to a name, path or value typed wrong: a target's name is
checked against the config first, with the one it nearly is; an option is never taken
for another it begins; every command that reads the run's config takes the run's
`--config` values; and no Python words (an errno, an object's repr, a module's name)
reach the user."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from kora.commands.main import build_parser
from kora.commands.main import main as kora_main
from kora.run.workflow.pipeline import Pipeline
from kora.run.workflow.unknown_files import unknown_request
from tests.helpers import REPO, copy_workflow
from tests.reportdata import make_judgments, write_jsonl

DEMO = "config/demo.yaml"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project with the demo's overlay, the current folder."""
    copy_workflow(tmp_path)
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / DEMO, tmp_path / DEMO)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def said(capsys: pytest.CaptureFixture[str]) -> str:
    return " ".join(capsys.readouterr().err.split())


@pytest.mark.timeout(60)
def test_no_option_is_taken_for_another_it_begins(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--config` was read as `--configfile` (argparse's abbreviations): the target typed
    before it was then unknown, for a config that had not been read."""
    assert not build_parser().allow_abbrev
    assert [n for n, p in subcommands().items() if p.allow_abbrev] == []
    with pytest.raises(SystemExit):
        kora_main(["plan", "mock-target", "--configf", DEMO])
    assert "unrecognized arguments: --configf" in said(capsys)


@pytest.mark.timeout(120)
def test_every_command_that_reads_the_runs_config_takes_its_config_values(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readers = [n for n, p in subcommands().items() if "--configfile" in p._option_string_actions]
    assert {"plan", "ping", "check-config", "usage", "bundle", "export"} <= set(readers)
    for name in readers:
        action = subcommands()[name]._option_string_actions.get("--config")
        assert action is not None and action.metavar == "KEY=VALUE", name
    argv = ["plan", "mock-target", "--configfile", DEMO, "--config", "budget={usd: 1}"]
    assert kora_main(argv) == 0
    assert "budget $1.0000: $0.0000 billed against it so far" in capsys.readouterr().out
    # as Snakemake's, it takes several values: a target typed after it is taken back
    assert (
        kora_main(["plan", "--configfile", DEMO, "--config", "budget={usd: 1}", "mock-target"]) == 0
    )
    assert "plan for mock-target:" in capsys.readouterr().out
    # a command printed to type next reads the same values
    write_jsonl(workspace / "results/mock-target/judgments/a.jsonl", make_judgments())
    argv = ["agreement", "mock-target", "--configfile", DEMO, "--config", "concurrency=4"]
    assert kora_main(argv) == 2
    assert f"NAME --configfile {DEMO} --config concurrency=4)" in said(capsys)
    # and one Snakemake refuses is refused the same way
    assert kora_main(["plan", "mock-target", "--configfile", DEMO, "--config", "budget.usd=1"]) == 2
    assert "--config budget.usd=1: a key of the config's top level" in said(capsys)


# each command that takes a target's name, with the name misspelt
MISSPELT = {
    "plan": ["plan", "mock-targt"],
    "plan --detect": ["plan", "mock-targt", "--detect", "0.1", "--against", "mock-target"],
    "check-config": ["check-config", "mock-targt"],
    "ping": ["ping", "mock-targt"],
    "bundle": ["bundle", "mock-targt", "-o", "b.zip"],
    "export": ["export", "mock-targt", "--hf", "out"],
    "annotate": ["annotate", "mock-targt", "--annotator", "ana"],
    "agreement": ["agreement", "mock-targt"],
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(MISSPELT))
def test_a_misspelt_target_is_refused_first_with_the_name_it_nearly_is(
    name: str, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kora_main([*MISSPELT[name], "--configfile", DEMO]) == 2
    assert said(capsys) == (
        "kora: error: no target 'mock-targt' in the config (targets: mock-target; did you "
        "mean 'mock-target'?): add it under `targets:`, or give the --configfile that "
        "defines it"
    )
    assert not (workspace / "results").exists() and not (workspace / "out").exists()


@pytest.mark.timeout(60)
def test_a_command_line_asking_snakemake_for_what_no_rule_makes_is_answered(
    workspace: Path,
) -> None:
    """rules/common.smk hands unknown_request Snakemake's own answer to whether a rule
    makes a file (`made`): a target's bare name, or a file of a target misspelt, would
    end in Snakemake's MissingRuleException."""
    pipeline = Pipeline.load([DEMO], workspace)

    def made(path: str) -> bool:
        return Path(path).name in ("results.json", "report.html")

    assert unknown_request(pipeline, ["mock-target"], made) == (
        "mock-target: a target's name; ask Snakemake for its files, e.g. its report: "
        "snakemake --cores 2 results/mock-target/report.html --configfile config/demo.yaml"
    )
    assert unknown_request(pipeline, ["results/mock-target/reprot.html"], made) == (
        "results/mock-target/reprot.html: no rule makes it (did you mean report.html?); a "
        "target's files: results.json, report.html, summary.json, manifest.json, "
        "usage.json, conversations.parquet"
    )
    assert unknown_request(pipeline, ["results/mock-targt/report.html"], made) == (
        "results/mock-targt/report.html: no target 'mock-targt' in the config (targets: "
        "mock-target; did you mean 'mock-target'?): add it under `targets:`, or give the "
        "--configfile that defines it"
    )
    assert unknown_request(pipeline, ["results/mock-target/report.html", "mock-target"]) is None


@pytest.mark.timeout(60)
def test_a_missing_config_typed_in_a_subfolder_is_not_found_there(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In results/mock-target, config/demo.yaml is results/mock-target/config/demo.yaml:
    not there, not "a file the run makes"."""
    sub = workspace / "results" / "mock-target"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert kora_main(["plan", "mock-target", "--configfile", DEMO]) == 2
    assert said(capsys) == "kora: error: results/mock-target/config/demo.yaml: not found"


@pytest.mark.timeout(60)
def test_check_config_takes_the_targets_of_the_run_it_checks(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A target written after --configfile was read as a config file: `mock-target: not
    found`."""
    assert kora_main(["check-config", "--configfile", DEMO, "mock-target"]) == 0
    assert "config OK" in said(capsys)
    # a file of the run's results written there is still named as what it is
    assert kora_main(["check-config", "--configfile", DEMO, "results/mock-target/report.html"]) == 2
    assert "results/mock-target/report.html: a file the run makes, read as a config" in said(capsys)


@pytest.mark.timeout(60)
def test_files_and_folders_that_are_not_there_are_said_in_koras_words(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "docs").mkdir()
    (workspace / "results" / "mock-target").mkdir(parents=True)
    assert kora_main(["bundle", "mock-target", "-o", "docs", "--configfile", DEMO]) == 2
    assert said(capsys) == "kora: error: docs: a folder, where a file is named"
    assert kora_main(["replay", "nothere.zip"]) == 2
    assert said(capsys) == "kora: error: nothere.zip: not found"
    assert kora_main(["replay", "docs"]) == 2
    assert said(capsys) == "kora: error: docs: a folder, where a file is named"


@pytest.mark.timeout(60)
def test_a_bundle_zipped_one_folder_down_is_said_to_be_so(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bundle unpacked, then packed again as its folder (`zip -r x.zip x`): replay said
    `not a result bundle ("There is no item named 'bundle.json' in the archive")`."""
    import zipfile

    with zipfile.ZipFile(workspace / "again.zip", "w") as z:
        z.writestr("x/bundle.json", "{}")
        z.writestr("x/manifest.json", "{}")
    assert kora_main(["replay", "again.zip"]) == 2
    assert said(capsys).endswith(
        "again.zip: not a result bundle: its files are in the folder x/ inside "
        "it; zip that folder's contents (cd into it, then zip -r), not the folder"
    )
    with zipfile.ZipFile(workspace / "other.zip", "w") as z:
        z.writestr("notes.txt", "hello")
    assert kora_main(["replay", "other.zip"]) == 2
    assert said(capsys).endswith(
        "other.zip: not a result bundle: no bundle.json or manifest.json at its top"
    )


@pytest.mark.timeout(60)
def test_no_help_names_a_python_function() -> None:
    for name, parser in subcommands().items():
        text = parser.format_help()
        assert "kora." not in text.replace("kora.yaml", ""), (name, text)


@pytest.mark.timeout(60)
def test_export_into_the_runs_results_says_they_are_the_runs(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = workspace / "results" / "mock-target"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("{}")
    assert kora_main(["export", "mock-target", "--hf", str(folder), "--configfile", DEMO]) == 2
    assert said(capsys) == (
        f"kora: error: {folder / 'manifest.json'}: a file of the run's results, so not "
        "replaced: name another folder for --hf"
    )
    assert (folder / "manifest.json").read_text() == "{}"


@pytest.mark.timeout(120)
def test_a_plan_with_nothing_to_pay_has_no_heading_over_nothing(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kora.commands import plan

    real = plan.estimate

    def nothing_to_pay(*args: Any) -> Any:
        return [s for s in real(*args) if not s.calls]

    monkeypatch.setattr(plan, "estimate", nothing_to_pay)
    assert kora_main(["plan", "mock-target", "--configfile", DEMO]) == 0
    assert "expected: output tokens a call by stage" not in capsys.readouterr().out


@pytest.mark.timeout(60)
def test_ping_with_no_key_says_nothing_was_sent(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert kora_main(["ping", "gpt-target"]) == 1
    out, err = capsys.readouterr()
    assert "target gpt: not sent: set OPENAI_API_KEY (model 'gpt') first" in out
    assert err == "kora ping: nothing was sent to a model whose key is not set\n"


@pytest.mark.timeout(60)
def test_a_misspelt_field_in_a_template_is_named_with_the_one_it_nearly_is(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = workspace / "prompts"
    shutil.copytree(REPO / "kora/benchmarks/v1/prompts", prompts)
    judge = prompts / "judge_safety.jinja"
    assert "scenario.narrative" in judge.read_text()
    judge.write_text(judge.read_text().replace("scenario.narrative", "scenario.narative"))
    (workspace / "mine.yaml").write_text(yaml.safe_dump({"prompts_dir": "prompts"}))
    assert kora_main(["check-config", "--configfile", DEMO, "mine.yaml"]) == 2
    err = said(capsys)
    assert "judge_safety.jinja" in err and "object" not in err
    assert "a Scenario has no field 'narative' (did you mean 'narrative'?)" in err


@pytest.mark.timeout(60)
def test_compare_targets_offers_the_target_with_results_a_name_nearly_is(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """compare-targets takes a target's name or a folder, inside a workspace or not: a
    misspelt name is checked against the targets with results."""
    (workspace / "results" / "mock-target").mkdir(parents=True)
    assert kora_main(["compare-targets", "mock-targt", "mock-target"]) == 2
    assert said(capsys) == (
        "kora: error: mock-targt: neither a path nor a target with results under results/ "
        "(did you mean 'mock-target'?)"
    )
