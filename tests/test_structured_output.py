"""Structured answers from OpenAI-compatible servers that each take the schema their own
way (kora.llm.providers.structured), and their refusals classed (kora.llm.wire.faults): against loopback
servers of each dialect (tests/dialects.py). tests/test_llamacpp.py does the same against
the real llama-cpp-python server."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from pydantic import BaseModel, Field

from kora.benchmarks import outcomes
from kora.benchmarks.schemas import ScenarioValidation
from kora.config.checks import validate_config
from kora.errors import ConfigError
from kora.llm.answers import StructuredOutputError
from kora.llm.base import ChatMessage, ProviderError
from kora.llm.client import ModelClient
from kora.llm.money.bill import BillWriter
from kora.llm.providers import structured
from kora.llm.providers.factories import Shared
from kora.llm.providers.structured import config_warnings, without_bounds
from kora.llm.settings.config import ModelConfig
from kora.llm.wire.faults import is_config_error, readable, server_reason
from tests.dialects import LLAMA_REFUSAL, DialectServer
from tests.helpers import REPO

pytestmark = pytest.mark.timeout(60)


class Verdict(BaseModel):
    grade: Literal["failing", "adequate", "exemplary"]
    reasons: str = Field(min_length=5, max_length=2000)
    tags: list[str] = Field(min_length=1, max_length=5)


GOOD = {"grade": "adequate", "reasons": "it sent the child to a parent", "tags": ["redirect"]}


def client(srv: DialectServer, **cfg: Any) -> ModelClient:
    config = ModelConfig(provider="openai", model="local", base_url=f"{srv.url}/v1", **cfg)
    return ModelClient("local-judge", config, Shared(bill=BillWriter(None, "t")))


def ask(c: ModelClient) -> Verdict:
    async def go() -> Verdict:
        try:
            return await c.structured([ChatMessage("user", "grade it")], Verdict, stage="t")
        finally:
            await c.aclose()

    return asyncio.run(go())


# --- the schema without its bounds ------------------------------------------------------


def test_without_bounds_drops_length_and_count_bounds_at_any_depth_and_keeps_the_rest() -> None:
    schema = {
        "type": "object",
        "properties": {
            # a property *named* like a keyword stays
            "maxLength": {"type": "integer", "minimum": 0, "maximum": 9},
            "text": {"type": "string", "minLength": 200, "maxLength": 2000, "pattern": "^a"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 9}, "maxItems": 5},
            "grade": {"enum": ["minLength", "maxLength"], "default": "minLength"},
            "either": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}]},
            "ref": {"$ref": "#/$defs/Inner"},
        },
        "required": ["text"],
        "$defs": {"Inner": {"type": "object", "minProperties": 1, "properties": {}}},
        "additionalProperties": {"type": "number", "exclusiveMinimum": 0},
    }
    before = copy.deepcopy(schema)
    out = without_bounds(schema)
    assert schema == before  # a copy: the original is untouched
    # a value's range stays: a grammar takes it in a few rules
    assert out["properties"]["maxLength"] == {"type": "integer", "minimum": 0, "maximum": 9}
    assert out["properties"]["text"] == {"type": "string", "pattern": "^a"}
    assert out["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert out["properties"]["grade"] == {
        "enum": ["minLength", "maxLength"],
        "default": "minLength",
    }
    assert out["properties"]["either"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert out["$defs"] == {"Inner": {"type": "object", "properties": {}}}
    assert out["additionalProperties"] == {"type": "number", "exclusiveMinimum": 0}
    assert out["required"] == ["text"] and out["properties"]["ref"] == {"$ref": "#/$defs/Inner"}


def test_minimums_keeps_the_lower_bounds_only() -> None:
    _, sent = structured.sent_schema(Verdict, "minimums")
    assert sent["properties"]["reasons"] == {"minLength": 5, "title": "Reasons", "type": "string"}
    assert (
        sent["properties"]["tags"]["minItems"] == 1 and "maxItems" not in sent["properties"]["tags"]
    )
    assert structured.sent_schema(Verdict, True)[1] == Verdict.model_json_schema()


@pytest.mark.parametrize(
    "schema", [outcomes.TestAssessment, outcomes.BehaviorAssessment, ScenarioValidation]
)
def test_the_projects_schemas_lose_every_bound(schema: type[BaseModel]) -> None:
    full = schema.model_json_schema()
    sent = without_bounds(full)
    text = repr(sent)
    assert not any(f"'{k}'" in text for k in structured.BOUNDS), text
    assert set(sent["properties"]) == set(full["properties"])  # no field lost


# --- each mode's request, and its answer -----------------------------------------------


@pytest.mark.parametrize("bounds", [False, "minimums"])
def test_llamacpp_mode_sends_json_object_with_the_schema_without_bounds(
    bounds: bool | str,
) -> None:
    with DialectServer("llamacpp", answer=lambda rec: GOOD) as srv:
        verdict = ask(client(srv, structured_output="json_object", schema_bounds=bounds))
    assert verdict.grade == "adequate"
    fmt = srv.requests[0].body["response_format"]
    assert fmt["type"] == "json_object"
    reasons = {"title": "Reasons", "type": "string"}
    assert fmt["schema"]["properties"]["reasons"] == (
        reasons if bounds is False else {**reasons, "minLength": 5}
    )


def test_llamacpp_refuses_json_schema_and_the_call_stops_at_once_saying_what_to_change() -> None:
    with DialectServer("llamacpp") as srv:
        c = client(srv)
        with pytest.raises(ProviderError) as info:
            ask(c)
        assert srv.count == 1  # not retried: the request itself is refused
        err = info.value
        assert err.config_error and not err.retryable and err.status == 500
        msg = str(err)
        assert "model 'local-judge' (local)" in msg and "HTTP 500" in msg
        assert "\\u000a" not in msg and "\n" in msg  # the server's lines, readable
        assert "body.response_format.type: Input should be 'text' or 'json_object'" in msg
        assert "app.py" not in msg  # the server's traceback is left out
        assert "structured_output: json_object" in msg and "models.local-judge" in msg
        # the model's next structured call fails the same way without being sent; its
        # text calls still go
        with pytest.raises(ProviderError, match="HTTP 500"):
            ask(c)
        assert srv.count == 1
        text = asyncio.run(c.text([ChatMessage("user", "hi")], stage="t"))
        assert text == "echo: hi" and srv.count == 2


def test_bounds_sent_to_llamacpp_lose_the_connection() -> None:
    """What the bounds switch is for: the real server dies on such a schema."""
    with DialectServer("llamacpp") as srv:
        with pytest.raises(ProviderError) as info:
            ask(client(srv, structured_output="json_object", timeout=5))
        assert info.value.status is None and "connection" in str(info.value).lower()


def test_tool_mode_reads_the_answer_from_the_forced_call() -> None:
    with DialectServer("vllm", answer=lambda rec: GOOD) as srv:
        verdict = ask(client(srv, structured_output="tool"))
    assert verdict.tags == ["redirect"]
    body = srv.requests[0].body
    assert body["tool_choice"] == {"type": "function", "function": {"name": "Verdict"}}
    assert body["tools"][0]["function"]["parameters"]["properties"]["reasons"]["maxLength"] == 2000
    assert "response_format" not in body


def test_ollama_format_goes_to_ollamas_own_chat_api() -> None:
    with DialectServer("ollama", answer=lambda rec: GOOD) as srv:
        c = client(srv, structured_output="ollama_format", temperature=0.0, max_tokens=300)
        verdict = ask(c)
        assert verdict.grade == "adequate"
        (rec,) = srv.requests
        assert rec.path == "/api/chat"
        assert rec.body["format"]["properties"]["grade"]["enum"][0] == "failing"
        assert rec.body["stream"] is False
        assert rec.body["options"] == {"num_predict": 300, "temperature": 0.0}
        assert c.payer.bill is not None
        assert c.payer.bill.sums[("local-judge", "t")].input_tokens == 13
        # text calls stay on the OpenAI-compatible API
        asyncio.run(c.text([ChatMessage("user", "hi")], stage="t"))
        assert srv.requests[1].path == "/v1/chat/completions"


def test_prompt_mode_puts_the_schema_in_the_system_prompt_and_checks_the_answer() -> None:
    with DialectServer("bare") as srv:
        srv.answer('{"grade": "superb"}', "```json\n" + str(GOOD).replace("'", '"') + "\n```")
        c = client(srv, structured_output="prompt", schema_bounds=False)
        verdict = asyncio.run(
            c.structured([ChatMessage("user", "grade it")], Verdict, stage="t", system="Judge.")
        )
    assert verdict.grade == "adequate"
    first, second = (r.body for r in srv.requests)
    system = first["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Judge.\n\nAnswer with")
    assert '"reasons":{"title":"Reasons","type":"string"}' in system["content"]
    assert "response_format" not in first and "tools" not in first
    # the invalid first answer was sent back with what was wrong
    assert "grade" in second["messages"][-1]["content"]


def test_prompt_mode_fails_the_item_clearly_when_the_model_cannot_follow() -> None:
    with DialectServer("bare") as srv:
        srv.answer("I think it is fine.", "Still fine.")
        with pytest.raises(StructuredOutputError, match="invalid Verdict twice"):
            ask(client(srv, structured_output="prompt"))
        assert srv.count == 2


# --- classing a refusal -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "reason", "config"),
    [
        (400, "max_tokens is too large", True),
        (404, "model 'x' not found", True),
        (422, "Unprocessable", True),
        (
            400,
            "Invalid prompt: your prompt was flagged as potentially violating our usage policy",
            False,
        ),
        (408, "timeout", False),
        (409, "conflict", False),
        (429, "slow down", False),
        (500, LLAMA_REFUSAL, True),
        (500, "Internal Server Error", False),
        (502, "Bad Gateway", False),
        (503, "invalid_request_error: response_format not supported", True),
    ],
)
def test_a_refusal_is_a_config_error_only_when_no_retry_can_change_it(
    status: int, reason: str, config: bool
) -> None:
    assert is_config_error(status, reason) is config


def test_the_servers_reason_is_read_from_any_error_shape() -> None:
    assert server_reason(b'{"error": {"message": "m1"}}', "x") == "m1"
    assert server_reason(b'{"error": "m2"}', "x") == "m2"  # Ollama
    assert server_reason(b'{"detail": "Not Found"}', "x") == "Not Found"  # FastAPI
    assert server_reason(b"Internal Server Error", "x") == "Internal Server Error"
    assert server_reason(b"", "Bad Gateway") == "Bad Gateway"
    shown = readable("line one\nline two\x1b[2J with sk-SECRET-1234", "sk-SECRET-1234")
    assert shown == "line one\n      line two\\u001b[2J with ****"


# --- kora check-config ------------------------------------------------------------------


def check(models: dict[str, Any], **extra: Any) -> Any:
    from kora import benchmarks

    raw = {
        "models": {"mock": {"provider": "mock"}, **models},
        "seed_model": "mock",
        "expand_model": "mock",
        "user_model": "mock",
        "judges": [next(iter(models))],
        **extra,
    }
    return validate_config(raw, benchmarks.get("v1").taxonomy)


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ({"provider": "anthropic", "model": "c", "structured_output": "tool"},
         "models.m.structured_output: only for OpenAI-compatible servers"),
        ({"provider": "mock", "schema_bounds": False}, "models.m.schema_bounds: only for"),
        ({"provider": "openai", "model": "g", "schema_bounds": "min"},
         "models.m.schema_bounds: expected true, false or minimums"),
        ({"provider": "openai", "model": "g", "batch": True, "structured_output": "json_object"},
         "batch mode sends OpenAI's Batch API requests"),
        ({"provider": "openai", "model": "g", "base_url": "https://api.openai.com/v1",
          "structured_output": "ollama_format"}, "ollama_format is for a local server"),
        ({"provider": "openai", "model": "g", "structured_output": "grammar"},
         "models.m.structured_output"),
    ],
)  # fmt: skip
def test_check_config_explains_a_wrong_combination(model: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
        check({"m": model})


def test_json_object_with_the_bounds_is_valid_but_warned_about() -> None:
    local = {"provider": "openai", "model": "s", "base_url": "http://127.0.0.1:8080/v1"}
    cfg = check({"m": {**local, "structured_output": "json_object"}})
    (note,) = config_warnings("m", cfg.models["m"])
    assert "schema_bounds: minimums" in note
    for bounds in (False, "minimums"):
        fixed = cfg.models["m"].model_copy(update={"schema_bounds": bounds})
        assert config_warnings("m", fixed) == []


@pytest.mark.parametrize("name", ["llamacpp", "vllm", "ollama", "lmstudio"])
def test_each_recipe_config_passes_check_config(name: str) -> None:
    """docs/local-servers.md: each recipe's overlay, merged over config.yaml."""
    from kora.config.files import load_run_config

    path = REPO / "config" / "examples" / f"{name}.yaml"
    cfg, _ = load_run_config([path], workdir=REPO)
    assert cfg.targets and cfg.judges
    for model_name, model in cfg.models.items():
        assert config_warnings(model_name, model) == []
    assert yaml.safe_load(Path(path).read_text())["models"]
