"""Chat services as targets in a whole run: written as config only, each test its own
session, blocked apps counted, per-turn times in the report, and no secret in any file."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.helpers import copy_workflow
from tests.services import AppRunnerServer, SessionChatServer, StatelessChatServer
from tests.test_services import example
from tests.workflows import TINY, snakemake

pytestmark = pytest.mark.slow

SECRETS = {"ACME_CHAT_TOKEN": "stateless-secret", "BUDDY_API_KEY": "session-secret"}


def _records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.mark.slow
def test_services_from_config_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    copy_workflow(tmp_path)
    with (
        StatelessChatServer(latency=0.02) as acme,
        SessionChatServer() as buddy,
        AppRunnerServer(block_open={"grooming_and_manipulation": "captcha"}) as runner,
    ):
        cfg: dict[str, Any] = copy.deepcopy(TINY)
        cfg["models"] = {}
        for name, url in (("stateless-json", acme.url), ("session-api", buddy.url)):
            cfg["models"].update(example(name, url)["models"])
        app = example("app-runner", runner.url)["models"]["some-app"]
        del app["api_key_env"]  # this runner asks for no token
        cfg["models"]["some-app"] = app
        cfg["targets"] = {
            "acme": {"model": "acme-chat"},
            "buddy": {"model": "buddy", "prompts": ["child"]},
            "app": {"model": "some-app"},
        }
        (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
        run = snakemake(
            tmp_path,
            "results/acme/report.html",
            "results/buddy/results.json",
            "results/app/report.html",
        )
        buddy_sessions = dict(buddy.sessions)
        assert not buddy.problems
        runner_closed = dict(runner.closed)
    log = run.stdout + run.stderr
    # the blocked app's tests failed: the run says so and exits non-zero
    assert run.returncode != 0 and "finished with failures" in log, log[-3000:]

    acme_results = orjson.loads((tmp_path / "results/acme/results.json").read_bytes())
    assert acme_results["complete"] and acme_results["tests"] > 0
    assert acme_results["models"]["acme-chat"]["provider"] == "http"
    turns = [
        t
        for f in (tmp_path / "results/acme/conversations").rglob("*.jsonl")
        for c in _records(f)
        for t in c["turns"]
    ]
    assert turns and all(t["latency"] >= 0.02 for t in turns)  # the service's own delay
    assert all(t["outputTokens"] == 7 for t in turns)  # read where the config says
    # usage.json counts the service's answers as the bill and the progress line do: each
    # turn a call with the tokens the service reported, paid by this run
    usage = orjson.loads((tmp_path / "results/acme/usage.json").read_bytes())
    (row,) = [r for r in usage["usage"] if r["model"] == "acme-chat"]
    assert row["calls"] == row["asked"] == len(turns), row
    assert row["output_tokens"] == 7 * len(turns) and row["paidThisRun"]["calls"] == len(turns)
    page = (tmp_path / "results/acme/report.html").read_text()
    assert 'id="reply-latency"' in page and "How long the target took" in page

    # each test its own session, closed; only the child variant
    buddy_results = orjson.loads((tmp_path / "results/buddy/results.json").read_bytes())
    assert buddy_results["complete"] and buddy_results["prompts"] == ["child"]
    assert len(buddy_sessions) == buddy_results["tests"]
    assert all(len(s.texts) == 3 and s.closed for s in buddy_sessions.values())

    app_results = orjson.loads((tmp_path / "results/app/results.json").read_bytes())
    blocked = app_results["blockedTests"]
    assert list(blocked) == ["captcha"] and blocked["captcha"] == app_results["failedTests"] > 0
    assert app_results["tests"] > 0  # the other risk's tests ran
    assert app_results["prompts"] == ["default"]
    assert set(runner_closed.values()) == {"completed"}
    app_page = (tmp_path / "results/app/report.html").read_text()
    assert 'id="blocked"' in app_page and "captcha" in app_page

    # no secret in any file the run wrote (results, shards, logs, call store, metadata)
    for f in tmp_path.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            for secret in SECRETS.values():
                assert secret.encode() not in data, f
