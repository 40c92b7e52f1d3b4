from __future__ import annotations

import re
import shutil
from typing import Annotated, Any

import pytest
import yaml

from kora.benchmarks.taxonomy import load_taxonomy
from kora.config.checks import validate_config
from kora.config.files import merge
from kora.errors import ConfigError
from tests.helpers import REPO

TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy")


def base() -> dict[str, Any]:
    return yaml.safe_load((REPO / "config.yaml").read_text())


def check(raw: dict[str, Any]) -> None:
    validate_config(raw, TAXONOMY)


def test_shipped_config_is_valid() -> None:
    cfg = validate_config(base(), TAXONOMY)
    assert cfg.targets["gpt-target"].model == "gpt"
    assert cfg.target_prompts("gpt-target") == ["default", "child"]


@pytest.mark.parametrize("count", [2, 4])
def test_an_even_number_of_judges_is_an_error(count: int) -> None:
    raw = base()
    names = [f"judge{i}" for i in range(count)]
    raw["models"].update({n: {"provider": "mock"} for n in names})
    raw["judges"] = names
    with pytest.raises(ConfigError) as err:
        check(raw)
    message = str(err.value)
    assert "judges" in message and f"{count} judges" in message
    assert "odd" in message and "add or remove one" in message


@pytest.mark.parametrize("count", [1, 3, 5])
def test_an_odd_number_of_judges_is_valid(count: int) -> None:
    raw = base()
    names = [f"judge{i}" for i in range(count)]
    raw["models"].update({n: {"provider": "mock"} for n in names})
    raw["judges"] = names
    assert validate_config(raw, TAXONOMY).judges == names


def test_demo_overlay_is_valid() -> None:
    raw = merge(base(), yaml.safe_load((REPO / "config" / "demo.yaml").read_text()))
    cfg = validate_config(raw, TAXONOMY)
    assert cfg.judges == ["mock"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c.update(colour="blue"), "unknown key 'colour'"),
        (lambda c: c["models"]["sonnet"].update(temprature=1), "unknown key 'models.sonnet.temprature'"),
        (lambda c: c["models"]["sonnet"].update(provider="cohere"), "unknown provider 'cohere'"),
        (lambda c: c.update(user_model="opus"), "user_model: model 'opus' is not defined"),
        (lambda c: c.update(judges=["sonnet", "haiku"]), "judges[1]: model 'haiku' is not defined"),
        (lambda c: c["targets"].update(t2={"model": "nope"}), "targets.t2.model: model 'nope'"),
        (lambda c: c["grid"].update(risks=["violence_and_physical_harm", "bogus_risk"]),
         "unknown risk id 'bogus_risk'"),
        (lambda c: c["grid"].update(age_ranges=["7to9", "18to99"]), "unknown age range '18to99'"),
        (lambda c: c["grid"].update(motivations=["greed"]), "unknown motivation id 'greed'"),
        (lambda c: c["models"].update(ep={"provider": "chat-endpoint"}), "needs `base_url`"),
        (lambda c: c.update(seed_model="ep") or c["models"].update(
            ep={"provider": "chat-endpoint", "base_url": "http://x"}), "can only be a target"),
        (lambda c: c["targets"].update(bad={"model": "gpt", "prompts": ["adult"]}),
         "unknown prompt variant 'adult'"),
    ],
)  # fmt: skip
def test_one_clear_error_naming_the_value(mutate: Any, message: str) -> None:
    raw = base()
    mutate(raw)
    with pytest.raises(ConfigError) as err:
        check(raw)
    assert message in str(err.value)


def test_chat_endpoint_target_runs_child_only() -> None:
    raw = base()
    raw["models"]["mydd"] = {"provider": "chat-endpoint", "base_url": "http://localhost:8000"}
    raw["targets"]["mydd"] = {"model": "mydd", "prompts": ["default", "child"]}
    cfg = validate_config(raw, TAXONOMY)
    assert cfg.target_prompts("mydd") == ["child"]
    assert cfg.skipped_prompts("mydd") == ["default"]
    raw["targets"]["mydd"]["prompts"] = ["default"]
    with pytest.raises(ConfigError, match="child"):
        check(raw)


def test_merge_follows_snakemake_configfile_rule() -> None:
    merged = merge({"a": {"x": 1, "y": 2}, "b": [1]}, {"a": {"y": 3}, "b": [2]})
    assert merged == {"a": {"x": 1, "y": 3}, "b": [2]}


def test_output_settings_leave_out_transport() -> None:
    raw = base()
    raw["models"]["sonnet"].update(requests_per_minute=100, max_concurrency=4, timeout=5,
                                   base_url="http://proxy", api_key_env="K")  # fmt: skip
    cfg = validate_config(raw, TAXONOMY)
    assert cfg.models["sonnet"].output_settings() == {
        "provider": "anthropic",
        "model": "claude-sonnet-5-5",
        "max_tokens": 4000,
    }


def test_a_model_setting_says_once_what_it_changes() -> None:
    """A setting declares on its field whether it changes answers: a new one is one edit,
    and reaches the jobs as declared, in the rule params (a change re-runs the shards it
    made) or from the run's config by model name (the token limits were once lost on the
    way); an undeclared one is refused."""
    from pydantic import create_model

    from kora.llm.settings.config import Changes, ModelConfig

    wider = create_model(
        "Wider",
        __base__=ModelConfig,
        seed=(Annotated[int | None, Changes.ANSWERS], None),
        pool=(Annotated[int | None, Changes.TRANSPORT], None),
    )
    configured = {"provider": "openai", "model": "m", "seed": 7, "pool": 3, "base_url": "http://p"}
    params = {"name": "judge", **wider.model_validate(configured).output_settings()}
    assert params == {"name": "judge", "provider": "openai", "model": "m", "seed": 7}
    # what changes answers from the params, what carries the calls from the config
    job = wider.of_job(params, {**configured, "seed": 8, "model": "other"})
    assert job == wider.model_validate(configured)
    loose = create_model("Loose", __base__=ModelConfig, other=(int | None, None))
    with pytest.raises(TypeError, match=r"Loose\.other: undeclared"):
        loose(provider="mock").output_settings()


# --- values that must not pass -------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c["targets"].update({"bad\n": {"model": "gpt"}}), "invalid target name"),
        (lambda c: c["grid"].update(seeds_per_task=True), "grid.seeds_per_task"),
        (lambda c: c["grid"].update(risks=[]), "grid.risks"),
        (lambda c: c["grid"].update(motivations=[]), "grid.motivations"),
        (lambda c: c["grid"].update(age_ranges=[]), "grid.age_ranges"),
        (lambda c: c["models"]["gpt"].update(base_url="http://"), "no host"),
        (lambda c: c.update(cache_dir="/"), "cache_dir"),
        (lambda c: c.update(cache_dir="."), "cache_dir"),
        (lambda c: c.update(prompts_dir="no-such-prompts"), "prompts_dir"),
    ],
)  # fmt: skip
def test_values_that_passed_and_should_not(mutate: Any, message: str) -> None:
    raw = base()
    mutate(raw)
    with pytest.raises(ConfigError, match=message):
        validate_config(raw, TAXONOMY, workdir=REPO)


# --- one loader for the Snakefile, check-config and plan ------------------------------


def write(path: Any, text: str) -> Any:
    path.write_text(text)
    return path


def test_overlays_merge_over_config_yaml_and_errors_name_the_file(tmp_path: Any) -> None:
    from kora.config.files import load_run_config

    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    shutil.copytree(REPO / "data" / "taxonomy", tmp_path / "data" / "taxonomy")
    demo = shutil.copy(REPO / "config" / "demo.yaml", tmp_path / "demo.yaml")
    cfg, _ = load_run_config([demo], workdir=tmp_path)
    assert cfg.judges == ["mock"] and "mock-target" in cfg.targets
    over = write(tmp_path / "over.yaml", "grid:\n  seeds_per_task: 0\n")
    with pytest.raises(ConfigError, match=r"over\.yaml: grid\.seeds_per_task"):
        load_run_config([over], workdir=tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("grid:\n  risks: [a, b\n", r"bad\.yaml:\d+(:\d+)?: not valid YAML"),
        ("judges: [mock]\njudges: [sonnet]\n", r"bad\.yaml:2: duplicate key 'judges'"),
        ("grid:\n  seeds_per_task: 2\n  seeds_per_task: 3\n", r"bad\.yaml:3: duplicate key"),
        ("- a\n- b\n", r"bad\.yaml: a list at its top level"),
    ],
)
def test_yaml_problems_name_the_file_and_line(tmp_path: Any, text: str, message: str) -> None:
    from kora.config.files import read_config_file

    with pytest.raises(ConfigError, match=message):
        read_config_file(write(tmp_path / "bad.yaml", text))


def test_a_missing_config_file_is_named(tmp_path: Any) -> None:
    from kora.config.files import read_config_file

    with pytest.raises(ConfigError, match=r"nope\.yaml: not found"):
        read_config_file(tmp_path / "nope.yaml")


def test_check_config_merges_overlays_as_the_readme_says(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kora.commands.main import main

    monkeypatch.chdir(REPO)
    assert main(["check-config"]) == 0
    assert main(["check-config", "--configfile", "config/demo.yaml"]) == 0
    assert "mock-target" in capsys.readouterr().err
    bad = write(tmp_path / "bad.yaml", "grid:\n  risks: [bogus]\n")
    assert main(["check-config", "--configfile", str(bad)]) == 2
    assert f"{bad}: grid.risks" in capsys.readouterr().err


@pytest.mark.slow
def test_snakemake_names_the_file_and_line_of_a_broken_config(tmp_path: Any) -> None:
    from tests.helpers import copy_workflow
    from tests.workflows import snakemake

    copy_workflow(tmp_path)
    text = (
        (tmp_path / "config.yaml").read_text().replace("seed_model: sonnet", "seed_model: [sonnet")
    )
    (tmp_path / "config.yaml").write_text(text)
    run = snakemake(tmp_path, "-n", cores=1, configfile=None, timeout=300)
    assert run.returncode != 0
    out = run.stdout + run.stderr
    # the line of the broken value, wherever config.yaml's comments put it
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "seed_model: [" in ln)
    assert "config.yaml:" in out and "not valid YAML" in out
    assert f"on line {line})" in out  # the line the unclosed bracket opened on
    assert "Traceback" not in out


@pytest.mark.parametrize("overlay", sorted(p.name for p in (REPO / "config").glob("*.yaml")))
def test_every_shipped_overlay_passes_check_config(
    overlay: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the README tells users to run these files as they are
    from kora.commands.main import main

    monkeypatch.chdir(REPO)
    # an overlay made to go over another says so in its comments: check them together
    said = re.search(
        r"--configfile ((?:config/\S+\.yaml ?)+)", (REPO / "config" / overlay).read_text()
    )
    files = said.group(1).split() if said else [f"config/{overlay}"]
    assert f"config/{overlay}" in files
    assert main(["check-config", "--configfile", *files]) == 0, capsys.readouterr().err
    assert "mock-target" in capsys.readouterr().err
