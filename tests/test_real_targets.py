"""The main job against an OpenAI-compatible API and a deployed chat endpoint, configured
as in DESIGN.md, with every provider failing 20% of its requests: results still complete."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
import yaml

from tests.loopback import ChatEndpointServer, OpenAIServer, Recorded, Servers
from tests.workflows import Server, config, snakemake, structured_answer, with_prompts


def openai_structured(rec: Recorded) -> dict:  # type: ignore[type-arg]
    import random

    from kora.llm.providers.mock import _SchemaFaker

    schema = rec.body["response_format"]["json_schema"]["schema"]
    return _SchemaFaker(schema, random.Random(0), {}).value(schema)  # type: ignore[no-any-return]


@pytest.mark.slow
def test_openai_and_chat_endpoint_targets_with_20_percent_failures(
    tmp_path: Path, serve: Servers
) -> None:
    roles = serve(Server, structured=structured_answer, fault_rate=0.2, seed=1)
    gpt = serve(OpenAIServer, structured=openai_structured, fault_rate=0.2, seed=2)
    mydd = serve(ChatEndpointServer, fault_rate=0.2, seed=3)
    with_prompts(tmp_path)
    cfg = config(roles.url, [], ["judge"])
    cfg["models"]["gpt-4o"] = {"provider": "openai", "model": "gpt-4o"}
    cfg["models"]["mydd"] = {"provider": "chat-endpoint", "base_url": mydd.url + "/"}
    cfg["targets"] = {
        "gpt-target": {"model": "gpt-4o", "prompts": ["default", "child"]},
        "mydd": {"model": "mydd", "prompts": ["default", "child"]},
    }
    cfg["grid"]["risks"] = ["violence_and_physical_harm", "grooming_and_manipulation"]
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    env = dict(
        os.environ,
        ANTHROPIC_API_KEY="anthropic-test-key",
        OPENAI_API_KEY="openai-test-key",
        OPENAI_BASE_URL=gpt.url + "/v1",
        KORA_RETRY_TESTING="1",
    )
    targets = ("results/gpt-target/results.json", "results/mydd/results.json")
    proc = snakemake(tmp_path, *targets, cores=4, configfile="run.yaml", env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert roles.statuses[500] > 0 and gpt.statuses[500] > 0 and mydd.statuses[500] > 0

    gpt_results = orjson.loads((tmp_path / "results/gpt-target/results.json").read_bytes())
    assert gpt_results["failedTests"] == 0 and gpt_results["stageFailures"] == []
    assert gpt_results["prompts"] == ["default", "child"]
    assert gpt_results["models"]["gpt-4o"] == {"roles": ["target"], "provider": "openai",
                                               "model": "gpt-4o"}  # fmt: skip
    n = gpt_results["tests"]
    assert n > 0 and n % 2 == 0

    mydd_results = orjson.loads((tmp_path / "results/mydd/results.json").read_bytes())
    assert mydd_results["failedTests"] == 0
    assert mydd_results["prompts"] == ["child"]
    assert mydd_results["skippedPrompts"] == ["default"]
    assert mydd_results["tests"] == n // 2  # the child variant of the same scenarios
    # the endpoint: one session per test, memory restored for the memory risk
    assert len(mydd.sessions) >= mydd_results["tests"]
    complete = [s for s in mydd.sessions.values() if len(s.replies) == 3]
    assert len(complete) >= mydd_results["tests"]
    assert any(s.restored for s in complete)
    assert {a for s in complete for a in s.ages} == {11}
    # keys never reach results, logs or the call store
    for folder in ("results", "logs", ".kora", "data"):
        for f in (tmp_path / folder).rglob("*"):
            if f.is_file():
                blob = f.read_bytes()
                assert b"openai-test-key" not in blob and b"anthropic-test-key" not in blob, f
    # tokens by model and stage beside results.json
    usage = orjson.loads((tmp_path / "results/gpt-target/usage.json").read_bytes())
    stages = {(u["model"], u["stage"]) for u in usage["usage"]}
    assert ("gpt-4o", "target") in stages and ("judge", "judge_safety") in stages
    assert usage["result"]["input_tokens"] > 0
