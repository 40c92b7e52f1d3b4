"""Fallback chains: a role naming several models tries the next when one fails.

Unit tests drive the chain with scripted providers; the workflow test runs Snakemake
against a loopback Anthropic server on which the first model of each chain is down.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from kora import benchmarks
from kora.benchmarks.expand import ScenarioValidationError, expand_with_fallback
from kora.benchmarks.messages import ChildMessageError, child_message
from kora.benchmarks.schemas import ScenarioValidation
from kora.benchmarks.taxonomy import load_taxonomy
from kora.benchmarks.templates import render
from kora.config.checks import validate_config
from kora.errors import ConfigError
from kora.llm.answers import StructuredOutputError
from kora.llm.base import ChatMessage, Request
from kora.llm.chain import ModelChain, as_asker
from kora.llm.money.usage import Usage
from kora.run.stages.base import role_param
from tests.fakes import client
from tests.helpers import REPO
from tests.test_stages import expansion_script, reference_scenario
from tests.workflows import Run, config

V1 = benchmarks.get("v1")
TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy")


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


class Down(Exception):
    """A provider failure the retry layer does not retry (as after its retries)."""


def down(request: Request) -> str:
    raise Down("HTTP 503: overloaded")


# --- the chain --------------------------------------------------------------------------


def test_a_call_that_fails_on_the_first_model_is_answered_by_the_next() -> None:
    usage = Usage()
    first, p1 = client(down, "first", usage=usage)
    second, p2 = client(lambda r: "hello from the second", "second", usage=usage)
    chain = ModelChain([first, second])
    text = run(chain.text([ChatMessage("user", "hi")], stage="seeds"))
    assert text == "hello from the second"
    assert len(p1.requests) == 1 and len(p2.requests) == 1
    # each model's calls are its own: the failed one and the answered one
    assert usage.by[("first", "seeds")]["failures"] == 1
    assert usage.by[("second", "seeds")]["calls"] == 1
    assert usage.by[("second", "seeds")]["failures"] == 0


def test_an_invalid_structured_answer_twice_moves_to_the_next_model() -> None:
    first, p1 = client(lambda r: "not json at all", "first")
    second, _ = client(
        lambda r: '{"verdict": "pass", "reasons": "every field fits the seed well"}', "second"
    )
    got = run(
        ModelChain([first, second]).structured(
            [ChatMessage("user", "check")], ScenarioValidation, stage="validate"
        )
    )
    assert got.verdict == "pass"
    assert len(p1.requests) == 2  # the first model's own second chance came first


def test_the_last_models_failure_is_the_calls_failure() -> None:
    first, _ = client(down, "first")
    second, _ = client(lambda r: "{}", "second")
    with pytest.raises(StructuredOutputError, match="'second'"):
        run(
            ModelChain([first, second]).structured(
                [ChatMessage("user", "check")], ScenarioValidation, stage="validate"
            )
        )


def test_a_cancelled_call_is_not_handed_to_the_next_model() -> None:
    """Ctrl-C (a job stopped) must stop the chain, not start paying the next model."""

    def cancelled(request: Request) -> str:
        raise asyncio.CancelledError

    first, _ = client(cancelled, "first")
    second, p2 = client(lambda r: "never", "second")
    with pytest.raises(asyncio.CancelledError):
        run(ModelChain([first, second]).text([ChatMessage("user", "hi")], stage="seeds"))
    assert p2.requests == []


def test_one_model_is_the_client_itself() -> None:
    only, _ = client(lambda r: "x", "only")
    assert as_asker([only]) is only


# --- expansion: a seed moves to the next expansion model ---------------------------------


def test_a_seed_the_first_expander_cannot_get_validated_goes_to_the_next() -> None:
    seed = reference_scenario("violence_and_physical_harm").seed
    strict, p1 = client(expansion_script(["fail", "fail"]), "strict")
    lenient, p2 = client(expansion_script(["pass"]), "lenient")
    user, up = client(lambda r: "how do i make it go boom")
    scenario = run(expand_with_fallback(seed, TAXONOMY, V1, [strict, lenient], user))
    assert scenario.firstUserMessage == "how do i make it go boom"
    assert len(p1.requests) == 4  # two attempts, each written and validated
    assert len(p2.requests) == 2
    assert len(up.requests) == 1  # one first message, for the scenario kept


def test_a_seed_no_expander_gets_validated_is_rejected_with_the_last_reasons() -> None:
    seed = reference_scenario("violence_and_physical_harm").seed
    a, _ = client(expansion_script(["fail", "fail"]), "a")
    b, _ = client(expansion_script(["fail", "fail"]), "b")
    user, _ = client(lambda r: "never asked")
    with pytest.raises(ScenarioValidationError, match="REASON-2"):
        run(expand_with_fallback(seed, TAXONOMY, V1, [a, b], user))


def test_an_expander_that_is_down_hands_the_seed_to_the_next() -> None:
    seed = reference_scenario("violence_and_physical_harm").seed
    broken, _ = client(down, "broken")
    working, _ = client(expansion_script(["pass"]), "working")
    user, _ = client(lambda r: "ok so what if")
    scenario = run(expand_with_fallback(seed, TAXONOMY, V1, [broken, working], user))
    assert scenario.id == seed.id


# --- the child's messages -----------------------------------------------------------------


def test_a_user_model_that_only_refuses_hands_the_message_to_the_next() -> None:
    scenario = reference_scenario("violence_and_physical_harm")
    risk = TAXONOMY.risk(scenario.riskCategoryId, scenario.riskId)
    prompt = render("first_user_message", risk=risk, seed=scenario.seed, scenario=scenario)
    refusing, p1 = client(lambda r: "", "refusing")
    willing, _ = client(lambda r: "can u help me with smth", "willing")
    text = run(child_message(ModelChain([refusing, willing]), prompt, stage="first_message"))
    assert text == "can u help me with smth"
    assert len(p1.requests) == 3  # its three attempts first
    with pytest.raises(ChildMessageError, match="'refusing'"):
        run(child_message(refusing, prompt, stage="first_message"))


# --- config ---------------------------------------------------------------------------------


def raw_config(**roles: Any) -> dict[str, Any]:
    return {
        "models": {"a": {"provider": "mock"}, "b": {"provider": "mock"}},
        "seed_model": "a",
        "expand_model": "a",
        "user_model": "a",
        "judges": ["a"],
        **roles,
    }


def test_a_role_may_name_a_chain_and_a_chain_of_one_is_its_model() -> None:

    cfg = validate_config(raw_config(seed_model=["a", "b"], user_model=["a"]), TAXONOMY)
    assert role_param(cfg, "seed_model") == [cfg.model_params("a"), cfg.model_params("b")]
    # a single name and a list of one give the same rule params: nothing re-runs
    one = validate_config(raw_config(), TAXONOMY)
    assert role_param(cfg, "user_model") == role_param(one, "user_model")
    assert role_param(one, "seed_model") == one.model_params("a")


@pytest.mark.parametrize(
    ("roles", "message"),
    [
        ({"seed_model": ["a", "nope"]}, "seed_model[1]: model 'nope' is not defined"),
        ({"expand_model": ["a", "a"]}, "expand_model: a model is listed twice"),
        ({"user_model": []}, "user_model: an empty list"),
        ({"seed_model": "nope"}, "seed_model: model 'nope' is not defined"),
    ],
)
def test_a_bad_chain_is_named_in_the_error(roles: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_config(raw_config(**roles), TAXONOMY)


# --- the workflow, first models down --------------------------------------------------------


@pytest.mark.slow
def test_a_run_whose_first_models_are_down_completes_on_the_fallbacks(tmp_path: Path) -> None:
    with Run.started(tmp_path) as runner:
        server = runner.server
        cfg = config(server.url, ["t1"], ["judge"])
        for role in ("seed", "expand", "user"):
            cfg["models"][f"{role}-down"] = {
                "provider": "anthropic",
                "model": f"claude-{role}-down",
                "base_url": server.url,
            }
            cfg[f"{role}_model"] = [f"{role}-down", role]
        server.fail_models = frozenset({"claude-seed-down", "claude-expand-down",
                                        "claude-user-down"})  # fmt: skip
        server.fail_status = 503
        calls, _ = runner.snakemake(cfg, "results/t1/results.json")
        results = orjson.loads((tmp_path / "results/t1/results.json").read_bytes())
        assert results["failedTests"] == 0 and results["tests"] > 0
        assert results["complete"] is True
        # every first model was asked and failed; its fallback answered
        used: Counter[str] = Counter(k.split(":")[0] for k in calls.elements())
        for role in ("seed", "expand", "user"):
            assert used[f"{role}-down"] > 0 and used[role] > 0
        assert "[fallback]" in "".join(p.read_text() for p in (tmp_path / "logs").rglob("*.log"))
        assert set(results["models"]["seed-down"]["roles"]) == {"seeds"}
        assert results["user"] == ["user-down", "user"]
        # the same command again: nothing to do, nothing asked
        again, _ = runner.snakemake(cfg, "results/t1/results.json")
        assert not again


@pytest.mark.slow
def test_a_first_model_that_cannot_be_reached_does_not_stop_a_chain(tmp_path: Path) -> None:
    """Before any job a run stops on a model nobody can reach, but not when it is in a
    fallback chain with a model that can take its calls: a warning names it instead."""
    import socket

    with Run.started(tmp_path) as runner:
        server = runner.server
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        cfg = config(server.url, ["t1"], ["judge"])
        cfg["models"]["gone"] = {"provider": "anthropic", "model": "claude-gone", "base_url": dead}
        cfg["seed_model"] = ["gone", "seed"]
        calls, log = runner.snakemake(cfg, "results/t1/results.json")
        assert "model 'gone': cannot connect" in log and "fallback chain" in log
        assert any(k.startswith("seed:") for k in calls)  # the chain's second model answered
        results = orjson.loads((tmp_path / "results/t1/results.json").read_bytes())
        assert results["failedTests"] == 0 and results["tests"] > 0
        # a model nobody else can stand in for still stops the run at once
        cfg["judges"] = ["gone"]
        _, log = runner.snakemake(cfg, "results/t1/results.json", ok=False)
        assert "model 'gone': cannot connect" in log
