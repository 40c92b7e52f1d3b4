from __future__ import annotations

from typing import Any

import pytest
import yaml

from kora.config import merge, validate_config
from kora.errors import ConfigError
from kora.taxonomy import load_taxonomy
from tests.helpers import REPO

TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy")


def base() -> dict[str, Any]:
    return yaml.safe_load((REPO / "config.yaml").read_text())


def check(raw: dict[str, Any]) -> None:
    validate_config(raw, TAXONOMY)


def test_shipped_config_is_valid() -> None:
    cfg = validate_config(base(), TAXONOMY)
    assert cfg.targets["gpt-target"].model == "gpt-4o"
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
        (lambda c: c["targets"].update(bad={"model": "gpt-4o", "prompts": ["adult"]}),
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
        "model": "claude-sonnet-4-5",
        "max_tokens": 4000,
    }
