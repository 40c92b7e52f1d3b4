"""`kora check-config` accepts only what the run accepts: every config in the table below is
refused by the run's loader (the one the Snakefile reads the config files with) and by
check-config, with the same message naming the file or the field; the slow test runs
Snakemake itself on each. Overlays merge as Snakemake merges them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from kora.config.files import load_run_config
from kora.errors import ConfigError
from tests.helpers import REPO, copy_workflow
from tests.workflows import command

DEMO = "config/demo.yaml"

# Snakemake reads the --configfile files itself before the workflow, and stops on one that
# is not there or holds no mapping of keys, naming no file: its words for it
SNAKEMAKE_NO_MAPPING = "Config file must be given as JSON or YAML with keys at top level."
SNAKEMAKE_NOT_FOUND = "No such file or directory"
SNAKEMAKE_NOT_YAML = "Config file is not valid JSON or YAML."

# (id, files written in the project (the last overlays, after config/demo.yaml), what
# both messages say, what Snakemake says instead when it refuses the file before the
# workflow is read)
BAD: list[tuple[str, dict[str, str], str, str | None]] = [
    ("empty", {"bad.yaml": ""}, "bad.yaml: holds no keys", SNAKEMAKE_NO_MAPPING),
    ("comments only", {"bad.yaml": "# to do\n"}, "bad.yaml: holds no keys", SNAKEMAKE_NO_MAPPING),
    ("null", {"bad.yaml": "~\n"}, "bad.yaml: holds no keys", SNAKEMAKE_NO_MAPPING),
    ("a list", {"bad.yaml": "- a\n"}, "bad.yaml: a list at its top level", SNAKEMAKE_NO_MAPPING),
    ("a scalar", {"bad.yaml": "hello\n"}, "bad.yaml: a str at its top level", SNAKEMAKE_NO_MAPPING),
    ("not there", {}, "bad.yaml: not found", SNAKEMAKE_NOT_FOUND),
    (
        "unclosed",
        {"bad.yaml": "grid:\n  risks: [a, b\n"},
        "bad.yaml:3:1: not valid YAML",
        SNAKEMAKE_NOT_YAML,
    ),
    ("duplicate", {"bad.yaml": "judges: [mock]\njudges: [mock]\n"}, "bad.yaml:2: duplicate", None),
    ("unknown key", {"bad.yaml": "grid: {seeds: 2}\n"}, "bad.yaml: unknown key 'grid.seeds'", None),
    (
        "wrong type",
        {"bad.yaml": "grid: {seeds_per_task: two}\n"},
        "bad.yaml: grid.seeds_per_task",
        None,
    ),
    (
        "out of range",
        {"bad.yaml": "grid: {seeds_per_task: 0}\n"},
        "bad.yaml: grid.seeds_per_task",
        None,
    ),
    ("unknown risk", {"bad.yaml": "grid: {risks: [bogus]}\n"}, "bad.yaml: grid.risks", None),
    ("even judges", {"bad.yaml": "judges: [mock, sonnet]\n"}, "bad.yaml: judges: 2 judges", None),
    ("unknown model", {"bad.yaml": "seed_model: nobody\n"}, "bad.yaml: seed_model", None),
    (
        "a budget in dollars and tokens",
        {"bad.yaml": "budget: {usd: 5, tokens: 1000}\n"},
        "bad.yaml: budget: give one of `usd` (dollars) or `tokens`",
        None,
    ),
    ("a budget of nothing", {"bad.yaml": "budget: {usd: 0}\n"}, "bad.yaml: budget.usd", None),
    (
        "structured_output on anthropic",
        {"bad.yaml": "models: {sonnet: {structured_output: tool}}\n"},
        "bad.yaml: models.sonnet.structured_output: only for OpenAI-compatible servers",
        None,
    ),
    (
        "ollama_format on OpenAI's public API",
        {"bad.yaml": "models: {gpt: {structured_output: ollama_format}}\n"},
        "bad.yaml: models.gpt.structured_output: ollama_format is for a local server",
        None,
    ),
    (
        "json_object on OpenAI's public API",
        {"bad.yaml": "models: {gpt: {structured_output: json_object}}\n"},
        "bad.yaml: models.gpt.structured_output: json_object is for a local server",
        None,
    ),
    (
        "json_object at api.openai.com",
        {
            "bad.yaml": "models: {gpt: {structured_output: json_object, "
            "base_url: 'https://api.openai.com/v1/'}}\n"
        },
        "bad.yaml: models.gpt.structured_output: json_object is for a local server",
        None,
    ),
    # issue 58, point 10: each in kora's words, naming the file and the key
    (
        "an age range, not a list",
        {"bad.yaml": "grid: {age_ranges: 7to9}\n"},
        "bad.yaml: grid.age_ranges: a list of age ranges, or `all` (got '7to9'; write [7to9])",
        None,
    ),
    (
        "a risk, not a list",
        {"bad.yaml": "grid: {risks: sycophancy}\n"},
        "bad.yaml: grid.risks: a list of risk ids, or `all` (got 'sycophancy'; write [sycophancy])",
        None,
    ),
    (
        "a misspelt risk",
        {"bad.yaml": "grid: {risks: [sycophncy]}\n"},
        "bad.yaml: grid.risks: unknown risk id 'sycophncy' (did you mean 'sycophancy'?)",
        None,
    ),
    (
        "a misspelt motivation",
        {"bad.yaml": "grid: {motivations: [curiosity_exploraton]}\n"},
        "bad.yaml: grid.motivations: unknown motivation id 'curiosity_exploraton' "
        "(did you mean 'curiosity_exploration'?)",
        None,
    ),
    (
        "a misspelt model",
        {"bad.yaml": "seed_model: mokc\n"},
        "bad.yaml: seed_model: model 'mokc' is not defined under `models` (did you mean 'mock'?)",
        None,
    ),
    (
        "a misspelt key",
        {"bad.yaml": "grid: {seeds_per_tsk: 2}\n"},
        "bad.yaml: unknown key 'grid.seeds_per_tsk' (did you mean 'seeds_per_task'?)",
        None,
    ),
    (
        "a misspelt required key",
        {"bad.yaml": "models: {svc: {provder: http, base_url: 'http://h'}}\n"},
        "bad.yaml: unknown key 'models.svc.provder' (did you mean 'provider'?)",
        None,
    ),
    (
        "a target that is not a mapping",
        {"bad.yaml": "targets: {x: 5}\n"},
        "bad.yaml: targets.x: expected a mapping of keys (got 5)",
        None,
    ),
    (
        "an unknown version",
        {"bad.yaml": "benchmark: v3\n"},
        "bad.yaml: benchmark: unknown version 'v3' (expected one of v1, v2)",
        None,
    ),
    (
        "usd and tokens from two overlays",
        {"a.yaml": "budget: {usd: 5}\n", "b.yaml": "budget: {tokens: 5000}\n"},
        "a.yaml and b.yaml: budget: give one of `usd` (dollars) or `tokens`",
        None,
    ),
    (
        "a misspelt provider",
        {"bad.yaml": "models: {sonnet: {provider: anthropc}}\n"},
        "bad.yaml: models.sonnet.provider: unknown provider 'anthropc' (did you mean 'anthropic'?)",
        None,
    ),
    (
        "a target after --configfile",
        {"bad.yaml": '{"models": {"mock": {"roles": ["seeds"]}}}'},
        "results/mock-target/results.json: a file the run makes, read as a config file",
        None,
    ),
]
# pydantic's own words for a bad value, which a user of kora never needs to read
PYDANTIC_WORDS = ("Input should", "instance of", "Value error", "literal[")
# that last one is a results file written after --configfile: made where a run puts it
AS_TARGET = {"a target after --configfile": "results/mock-target/results.json"}


def project(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    copy_workflow(tmp_path)
    shutil.copytree(REPO / "config", tmp_path / "config")
    return tmp_path


def lay_out(workdir: Path, case: str, files: dict[str, str]) -> list[str]:
    """Write the case's files; the overlays as a user would give them."""
    names = []
    for name, text in files.items():
        name = AS_TARGET.get(case, name)
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(text)
        names.append(name)
    return [DEMO, *(names or ["bad.yaml"])]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("case", "files", "says", "snakemake_says"), BAD, ids=[c[0] for c in BAD])
def test_the_loader_and_check_config_refuse_alike(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
    files: dict[str, str],
    says: str,
    snakemake_says: str | None,
) -> None:
    from kora.commands.main import main

    workdir = project(tmp_path)
    monkeypatch.chdir(workdir)
    overlays = lay_out(workdir, case, files)
    with pytest.raises(ConfigError) as refused:
        load_run_config(overlays, workdir=workdir)
    message = str(refused.value)
    assert says in message
    for words in PYDANTIC_WORDS:
        assert words not in message
    assert main(["check-config", "--configfile", *overlays]) == 2
    assert f"kora: error: {message}" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_snakemake_refuses_each_with_the_same_words(tmp_path: Path) -> None:
    """The run itself (a dry run: the config is read before any job), beside check-config,
    on every config of the table."""
    for case, files, says, snakemake_says in BAD:
        workdir = project(tmp_path / case.replace(" ", "-").replace("'", ""))
        overlays = " ".join(lay_out(workdir, case, files))
        run = command(
            workdir,
            f"snakemake -n --cores 1 results/mock-target/results.json --configfile {overlays}",
        )
        ran = run.stdout + run.stderr
        check = command(workdir, f"kora check-config --configfile {overlays}")
        checked = check.stdout + check.stderr
        assert run.returncode != 0, f"{case}: the run accepted it\n{ran[-2000:]}"
        assert check.returncode == 2, f"{case}: check-config accepted it\n{checked}"
        assert says in checked, f"{case}\n{checked}"
        if snakemake_says is None:
            message = checked.strip().removeprefix("kora: error: ")
            assert message in ran, f"{case}: the run said\n{ran[-2000:]}\ncheck-config\n{checked}"
        else:  # refused by Snakemake before the workflow is read: its words, not ours
            assert snakemake_says in ran, f"{case}\n{ran[-2000:]}"


def test_overlays_merge_as_snakemake_merges_them(tmp_path: Path) -> None:
    """Snakemake merges the --configfile files with one another first, then over
    config.yaml: a target one overlay drops and a later one sets again keeps what
    config.yaml says of it (here its model)."""
    from snakemake.utils import update_config

    from kora.config.files import read_config_file

    workdir = project(tmp_path)
    (workdir / "again.yaml").write_text("targets:\n  gpt-target: {prompts: [child]}\n")
    overlays = [DEMO, "again.yaml"]
    config, _ = load_run_config(overlays, workdir=workdir)
    snakemakes: dict[str, Any] = {}
    for f in overlays:
        update_config(snakemakes, read_config_file(workdir / f))
    merged = read_config_file(workdir / "config.yaml")
    update_config(merged, snakemakes)
    assert merged["targets"]["gpt-target"] == {"model": "gpt", "prompts": ["child"]}
    target = config.targets["gpt-target"]
    assert (target.model, target.prompts) == ("gpt", ["child"])


# --- `--config KEY=VALUE` (issue 58, point 10) ----------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("value", "says"),
    [
        # YAML reads `{usd:5}` as one key, `usd:5`, with no value
        ("budget={usd:5}", "--config: unknown key 'budget.usd:5' (YAML reads `usd:5` as a key"),
        ("budget={usd: 5, tokens: 9}", "--config: budget: give one of `usd` (dollars) or `tokens`"),
        ("grid={risks: sycophancy}", "--config: grid.risks: a list of risk ids, or `all`"),
        # Snakemake takes a top-level key before `=` only
        ("budget.usd=5", "--config budget.usd=5: a key of the config's top level before `=`"),
    ],
)
def test_check_config_names_a_bad_config_value_and_not_the_last_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    value: str,
    says: str,
) -> None:
    from kora.commands.main import main

    workdir = project(tmp_path)
    monkeypatch.chdir(workdir)
    (workdir / "more.yaml").write_text("grid: {seeds_per_task: 2}\n")
    assert main(["check-config", "--configfile", DEMO, "more.yaml", "--config", value]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert "more.yaml" not in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_snakemake_names_a_bad_config_value_as_check_config_does(tmp_path: Path) -> None:
    """The run blames `--config`, not the last --configfile, in check-config's words."""
    workdir = project(tmp_path)
    (workdir / "more.yaml").write_text("grid: {seeds_per_task: 2}\n")
    for value in ("budget={usd:5}", "budget={usd: 5, tokens: 9}"):
        line = f"--configfile {DEMO} more.yaml --config '{value}'"
        run = command(workdir, f"snakemake -n --cores 1 results/mock-target/results.json {line}")
        check = command(workdir, f"kora check-config {line}")
        message = check.stderr.strip().removeprefix("kora: error: ")
        assert check.returncode == 2 and message.startswith("--config: "), check.stderr
        assert run.returncode != 0 and message in run.stdout + run.stderr, run.stderr[-2000:]


# --- a budget in dollars and the models a run calls (issue 58 round 2, point 7) -------

# the run's words when it is refused (kora.run.session, before its first call)
UNPRICED = (
    "budget: a budget in dollars needs a `price` on every paid model the run calls; gpt "
    "has none (set it, or use `budget: {tokens: N}`)"
)


@pytest.mark.timeout(60)
def test_check_config_refuses_the_dollar_budget_a_run_of_a_target_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """config.yaml's gpt-target calls gpt, which has no price: its run is refused with a
    budget in dollars, and check-config said `config OK`."""
    from kora.commands.main import main

    monkeypatch.chdir(project(tmp_path))
    assert main(["check-config", "--config", "budget={usd: 5}"]) == 2
    assert capsys.readouterr().err == (
        f"kora: error: config.yaml + --config: a run of gpt-target is refused: {UNPRICED}\n"
    )
    # and the plan says it in the same words
    assert main(["plan", "gpt-target", "--config", "budget={usd: 5}"]) == 0
    assert f"the run is refused, as it says: {UNPRICED}" in capsys.readouterr().out
    # the demo's target calls the mock alone, which costs nothing
    assert main(["check-config", "--configfile", DEMO, "--config", "budget={usd: 5}"]) == 0
    assert "config OK" in capsys.readouterr().err


# --- templates: rendered before the first call (issue 58, point 3) --------------------


def edited_prompts(workdir: Path, stem: str, edit: Any) -> list[str]:
    """The project's templates copied to prompts/ and `stem` edited there; the overlays of
    a demo run that uses them."""
    shutil.copytree(REPO / "kora" / "benchmarks" / "v1" / "prompts", workdir / "prompts")
    path = workdir / "prompts" / f"{stem}.jinja"
    path.write_text(edit(path.read_text()))
    (workdir / "edit.yaml").write_text("prompts_dir: prompts\n")
    return [DEMO, "edit.yaml"]


def stray_line(text: str) -> str:
    """A line typed just above the first `{% block %}`, where it is never sent."""
    return text.replace("{% block", "Be strict with the assistant.\n{% block", 1)


@pytest.mark.timeout(60)
def test_a_stray_line_in_an_edited_template_is_refused_by_check_config_and_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kora.commands.main import main

    workdir = project(tmp_path)
    monkeypatch.chdir(workdir)
    overlays = edited_prompts(workdir, "judge_safety", stray_line)
    line = stray_line((REPO / "kora/benchmarks/v1/prompts/judge_safety.jinja").read_text())
    number = line.splitlines().index("Be strict with the assistant.") + 1
    says = f"prompts/judge_safety.jinja, line {number}: text outside"
    assert main(["check-config", "--configfile", *overlays]) == 2
    assert says in capsys.readouterr().err
    assert main(["plan", "mock-target", "--configfile", *overlays]) == 2
    out, err = capsys.readouterr()
    assert says in err and "judgments" not in out


# the line on_older_children adds, in the judge's template
OLDER_NOTE_LINE = (
    REPO / "kora/benchmarks/v1/prompts/judge_safety.jinja"
).read_text().splitlines().index("{% block user %}") + 2


def on_older_children(text: str) -> str:
    """A variable no prompt has, used only past the youngest age range: the sample test
    (a 9-year-old's) never reaches it; the demo's 13to17 tests do."""
    return text.replace(
        "{% block user %}",
        "{% block user %}\n{% if seed.ageRange != '7to9' %}{{ older_note }}{% endif %}",
    )


@pytest.mark.timeout(120)
def test_plan_names_a_template_error_that_only_the_runs_own_tests_meet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kora.commands.main import main

    workdir = project(tmp_path)
    monkeypatch.chdir(workdir)
    overlays = edited_prompts(workdir, "judge_safety", on_older_children)
    assert main(["plan", "mock-target", "--configfile", *overlays]) == 2
    out, err = capsys.readouterr()
    says = f"prompts/judge_safety.jinja, line {OLDER_NOTE_LINE}: 'older_note' is undefined"
    assert says in err, err
    assert "judgments" not in out


@pytest.mark.timeout(120)
def test_check_config_names_a_template_error_that_one_risk_of_the_run_meets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """check-config said `config OK` where `kora plan` named the error (a new user's
    finding): the sample test is of another risk than the one the template goes wrong for."""
    from kora.commands.main import main

    workdir = project(tmp_path)
    monkeypatch.chdir(workdir)

    def for_cybersecurity(text: str) -> str:
        return text.replace(
            "{% block user %}",
            "{% block user %}\n{% if risk.id == 'cybersecurity' %}{{ older_note }}{% endif %}",
        )

    overlays = edited_prompts(workdir, "judge_safety", for_cybersecurity)
    says = f"prompts/judge_safety.jinja, line {OLDER_NOTE_LINE}: 'older_note' is undefined"
    assert main(["check-config", "--configfile", *overlays]) == 2
    assert says in capsys.readouterr().err
    # a risk the run does not test is not rendered: a run of the others is checked OK
    others = workdir / "others.yaml"
    others.write_text("grid: {risks: [sycophancy]}\n")
    assert main(["check-config", "--configfile", *overlays, str(others)]) == 0
    assert "config OK" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_template_error_stops_the_run_before_a_call_and_keeps_its_results(
    tmp_path: Path,
) -> None:
    """A finished run, then its judge's template edited: a stray line is refused before
    any job (not one call made); an error only the run's own tests meet stops it at its
    start, where it plans its calls (not one call made); a parameter the judge's server
    refuses stops the run as a configuration error. Each time
    results.json is the finished one, byte for byte."""
    from tests.workflows import Run, config

    with Run.started(tmp_path) as run:
        cfg = config(run.server.url, ["t1"], ["judge"])
        results = run.workdir / "results" / "t1" / "results.json"
        run.snakemake(cfg, "results/t1/results.json")
        finished = results.read_bytes()
        assert orjson.loads(finished)["complete"] is True
        template = run.workdir / "prompts" / "judge_safety.jinja"
        original = template.read_text()

        template.write_text(stray_line(original))
        calls, err = run.snakemake(cfg, "results/t1/results.json", ok=False)
        assert not calls, calls
        assert "prompts/judge_safety.jinja, line" in err and "text outside" in err
        assert results.read_bytes() == finished

        # the config's grid is 10to12: the sample passes, every test of the run would
        # fail; the run's start plans its calls as `kora plan` does, and stops on it
        template.write_text(on_older_children(original))
        calls, err = run.snakemake(cfg, "results/t1/results.json", ok=False)
        assert not calls, calls
        said = " ".join(err.split())
        assert "kora: error: prompt template prompts/judge_safety.jinja" in said, err[-3000:]
        assert f"judge_safety.jinja, line {OLDER_NOTE_LINE}: 'older_note' is undefined" in said
        assert "retry only what failed" not in said and "service was down" not in said
        assert results.read_bytes() == finished

        # a parameter the judge's server refuses (a 400): the same stop, the same results
        template.write_text(original)
        cfg["models"]["judge"]["max_tokens"] = 999  # the judgments are made again
        run.server.fail_models = frozenset({"claude-judge"})
        calls, err = run.snakemake(cfg, "results/t1/results.json", ok=False)
        said = " ".join(err.split())
        assert "the run stopped on a configuration error" in said, err[-3000:]
        assert "retry only what failed" not in said
        assert results.read_bytes() == finished
