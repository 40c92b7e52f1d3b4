"""`reask_invalid_answers`: a structured answer that fails its schema is sent back once with
the reason (the project's addition, the default) or fails its item at once, as in the
reference (false). The key is the whole run's, checked with the config, and reaches the
jobs through the rule params, so switching it re-runs the shards it changes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, Field

from kora.benchmarks.taxonomy import load_taxonomy
from kora.config.checks import validate_config
from kora.errors import ConfigError
from kora.llm.answers import StructuredOutputError
from kora.llm.base import ChatMessage, Request
from kora.llm.client import ModelClient
from kora.llm.providers.factories import Shared
from kora.llm.settings.config import ModelConfig
from kora.run.jobs.context import RunSettings
from tests.fakes import Scripted
from tests.helpers import REPO

pytestmark = pytest.mark.timeout(60)
TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy")


class Grade(BaseModel):
    grade: str = Field(pattern="^(failing|adequate|exemplary)$")


def ask(reask: bool) -> tuple[Grade | StructuredOutputError, list[Request]]:
    """A model whose first answer breaks the schema and whose second is sound."""
    answers = iter(['{"grade": "bad"}', '{"grade": "adequate"}'])
    provider = Scripted(lambda r: next(answers), lambda r: "stop")
    config = ModelConfig(provider="mock", reask_invalid_answers=reask)
    client = ModelClient("judge", config, Shared(fixed={"judge": provider}))

    async def go() -> Grade:
        return await client.structured([ChatMessage("user", "grade it")], Grade, stage="t")

    try:
        return asyncio.run(go()), provider.requests
    except StructuredOutputError as exc:
        return exc, provider.requests


def test_an_invalid_answer_is_sent_back_once_with_the_reason_by_default() -> None:
    got, requests = ask(True)
    assert got == Grade(grade="adequate") and len(requests) == 2
    again = requests[1].messages[-1].content
    assert "rejected because" in again and "grade" in again


def test_switched_off_an_invalid_answer_fails_its_item_after_one_call() -> None:
    got, requests = ask(False)
    assert isinstance(got, StructuredOutputError) and len(requests) == 1
    assert "asked once: reask_invalid_answers is false" in str(got)


def base() -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "config.yaml").read_text()))


def test_the_key_is_the_runs_and_reaches_the_jobs_through_their_params() -> None:
    on = validate_config(base(), TAXONOMY)
    assert on.reask_invalid_answers is True
    # on (the default), the params are what they were: no shard made before re-runs
    assert "reask_invalid_answers" not in on.model_params("sonnet")
    off = validate_config({**base(), "reask_invalid_answers": False}, TAXONOMY)
    params = off.model_params(off.judges[0])
    assert params["reask_invalid_answers"] is False
    # a job's client built from those params asks once
    job = RunSettings(models={}).model(params)
    assert job.reask_invalid_answers is False
    # the answers themselves do not change: the call store's identity leaves it out
    assert "reask_invalid_answers" not in job.output_settings()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c.update(reask_invalid_answers="no"), "reask_invalid_answers"),
        (lambda c: c["models"]["sonnet"].update(reask_invalid_answers=False),
         "models.sonnet.reask_invalid_answers: a key of the whole run: set it at the top level"),
    ],
)  # fmt: skip
def test_a_bad_value_or_place_is_named(mutate: Any, message: str) -> None:
    raw = base()
    mutate(raw)
    with pytest.raises(ConfigError, match=message):
        validate_config(raw, TAXONOMY)
