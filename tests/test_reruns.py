"""Incremental reruns and failures, counted at a loopback Anthropic server.

The workflow runs as a user runs it (Snakemake subprocesses, the real SDK), every role a
differently named model on one loopback Messages API server, so each request can be told
apart by model and output type.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.workflows import Run, config, kora_has_the_last_word

pytestmark = pytest.mark.slow


@pytest.fixture()
def run(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Run.started(tmp_path) as r:  # edits go to a private copy of the templates
        yield r


def roles(calls: Counter[str]) -> set[str]:
    return {k.split(":")[0] for k, v in calls.items() if v}


@pytest.mark.slow
def test_rerun_cases_pay_only_for_what_changed(run: Run) -> None:
    url = run.server.url
    cfg = config(url, ["t1"], ["judge"])
    first, _ = run.snakemake(cfg, "results/t1/results.json")
    assert roles(first) == {"seed", "expand", "user", "judge", "t1"}
    assert first["seed:ModelScenarioSeeds"] == 1  # one call per shard

    again, _ = run.snakemake(cfg, "results/t1/results.json")
    assert sum(again.values()) == 0  # nothing to do, nothing paid

    # add a second target: only its shards run, nothing upstream is paid again
    cfg2 = config(url, ["t1", "t2"], ["judge"])
    added, _ = run.snakemake(cfg2, "results/t1/results.json", "results/t2/results.json")
    assert "t2" in roles(added) and roles(added) <= {"t2", "user", "judge"}
    tests = first["judge:TestAssessment"]
    assert first["t1:text"] == 3 * tests
    assert added["t2:text"] == 3 * tests  # 3 turns for each of the same tests

    # add judges (the count stays odd): only judgments run, and only the new judges are paid
    cfg3 = config(url, ["t1", "t2"], ["judge", "judge2", "judge3"])
    judged, _ = run.snakemake(cfg3, "results/t1/results.json", "results/t2/results.json")
    assert roles(judged) == {"judge2", "judge3"}
    for new in ("judge2", "judge3"):
        assert judged[f"{new}:TestAssessment"] == 2 * tests  # two targets
        assert judged[f"{new}:BehaviorAssessment"] == 2 * tests
    results = orjson.loads((run.workdir / "results/t1/results.json").read_bytes())
    assert results["judges"] == ["judge", "judge2", "judge3"]


@pytest.mark.parametrize(
    ("stem", "expected_roles", "forbidden"),
    [
        ("judge_safety", {"judge"}, {"seed", "expand", "user", "t1"}),
        ("next_user_message", {"user"}, {"seed", "expand"}),
    ],
)
@pytest.mark.slow
def test_prompt_edit_reruns_only_its_users(
    run: Run, stem: str, expected_roles: set[str], forbidden: set[str]
) -> None:
    cfg = config(run.server.url, ["t1"], ["judge"])
    first, _ = run.snakemake(cfg, "results/t1/results.json")
    template = run.workdir / "prompts" / f"{stem}.jinja"
    template.write_text(
        template.read_text().replace("{% endblock %}", "\nBe thorough.\n{% endblock %}", 1)
    )
    edited, log = run.snakemake(cfg, "results/t1/results.json")
    assert expected_roles <= roles(edited)
    assert not (roles(edited) & forbidden), edited
    if stem == "judge_safety":
        # only the safety judge's calls: the behaviour judgments come from the store
        assert set(edited) == {"judge:TestAssessment"}
        assert edited["judge:TestAssessment"] == first["judge:TestAssessment"]
        assert "rule conversations" not in log and "rule scenarios" not in log
        assert "rule judgments" in log  # where the run lists its jobs
    else:
        assert "rule seeds" not in log and "rule scenarios" not in log
        assert "rule conversations" in log and "rule judgments" in log
        # the first target reply of each test did not change: it is not paid again
        assert edited.get("t1:text", 0) < first["t1:text"]


@pytest.mark.slow
def test_failed_items_are_recorded_and_retried_by_the_same_command(run: Run) -> None:
    cfg = config(run.server.url, ["t1"], ["judge"])
    run.snakemake(cfg, "results/t1/results.json")
    # the target now fails every call: the conversations fail, the rest completes
    cfg_bad = config(run.server.url, ["t1"], ["judge"])
    cfg_bad["models"]["t1"]["model"] = "claude-t1-broken"
    run.server.fail_models = frozenset({"claude-t1-broken"})
    run.server.fail_status = 503  # a transient fault: retried, then the item fails
    bad, log = run.snakemake(cfg_bad, "results/t1/results.json", ok=False)
    assert roles(bad) == {"t1-broken"}  # only the target was called, and failed
    results = orjson.loads((run.workdir / "results/t1/results.json").read_bytes())
    assert results["tests"] == 0 and results["failedTests"] > 0
    assert results["complete"] is False
    assert {f["prompt"] for f in results["failed"]} == {"default", "child"}
    assert "503" in results["failed"][0]["example"]
    # a failed run does not look like a success: non-zero exit and a closing summary
    n = results["failedTests"]
    assert f"{n} of {n} tests of target 't1' failed" in log
    assert "HTTP 503" in log and "model is unavailable" in log
    assert "to retry only what failed (later, if the service was down" in log
    # the provider recovers; the same command retries only the failed items
    run.server.fail_models = frozenset()
    fixed, _ = run.snakemake(cfg_bad, "results/t1/results.json")
    results = orjson.loads((run.workdir / "results/t1/results.json").read_bytes())
    assert results["failedTests"] == 0 and results["tests"] > 0
    assert results["complete"] is True
    assert roles(fixed) <= {"t1-broken", "user", "judge"}
    assert "seed" not in roles(fixed) and "expand" not in roles(fixed)


@pytest.mark.timeout(600)
def test_a_request_the_server_refuses_stops_the_run_saying_to_fix_the_config(run: Run) -> None:
    """A 400 is the model's configuration, not bad luck: not retried, the job stops at
    once with the server's reason and what to change, and the run ends saying so."""
    cfg = config(run.server.url, ["t1"], ["judge"])
    cfg["models"]["t1"]["model"] = "claude-t1-broken"
    run.server.fail_models = frozenset({"claude-t1-broken"})  # HTTP 400
    calls, log = run.snakemake(cfg, "results/t1/results.json", ok=False)
    tests = 2 * 2  # 2 seeds x 2 prompt variants
    assert 1 <= calls["t1-broken:text"] <= tests, calls  # never retried
    assert "model 't1' (claude-t1-broken): HTTP 400: the server refused the request" in log
    assert "model is unavailable" in log and "To fix: check models.t1" in log
    assert "Fix the config first" in log and "call store" in log
    assert "retry only what failed" not in log
    kora_has_the_last_word(log)  # not Snakemake's report of the job it stopped
    assert not (run.workdir / "results/t1/results.json").exists()


def results_of(run: Run, target: str = "t1") -> dict[str, Any]:
    return orjson.loads((run.workdir / f"results/{target}/results.json").read_bytes())  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.parametrize("change", ["model", "user_model"])
def test_a_failed_rerun_after_a_config_change_is_rebuilt_by_the_same_command(
    run: Run, change: str
) -> None:
    """Change what a target's conversations depend on, let the new run stop on a 401,
    fix the cause: the same command rebuilds everything the failure removed, and
    results.json describes the new config, never the old one."""
    cfg = config(run.server.url, ["t1"], ["judge"])
    run.snakemake(cfg, "results/t1/results.json")
    assert results_of(run)["models"]["t1"]["model"] == "claude-t1"
    changed = config(run.server.url, ["t1"], ["judge"])
    role = "t1" if change == "model" else "user"
    changed["models"][role]["model"] = f"claude-{role}-new"
    run.server.fail_models = frozenset({f"claude-{role}-new"})
    run.server.fail_status = 401
    run.snakemake(changed, "results/t1/results.json", ok=False)
    run.server.fail_models = frozenset()
    fixed, log = run.snakemake(changed, "results/t1/results.json")
    assert "Nothing to be done" not in log
    assert f"{role}-new" in roles(fixed)
    results = results_of(run)
    assert results["models"][role]["model"] == f"claude-{role}-new"
    assert results["failedTests"] == 0 and results["tests"] > 0
    shards = list((run.workdir / "results/t1/conversations").rglob("*.jsonl"))
    assert shards, "the conversation shards were not rebuilt"
    for shard in shards:
        for line in shard.read_bytes().splitlines():
            assert orjson.loads(line).get("error") is None


def test_an_unreachable_target_stops_the_run_at_once_naming_it(run: Run) -> None:
    """Connection refused is a configuration error, not something to retry for minutes:
    the run stops before any job starts, naming the model and the URL."""
    import socket

    cfg = config(run.server.url, ["t1"], ["judge"])
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    cfg["models"]["t1"]["base_url"] = dead
    calls, log = run.snakemake(cfg, "results/t1/results.json", ok=False, backoff=True)
    assert "'t1'" in log and dead in log and "Connection refused" in log
    assert "localrule" not in log  # no job started, so nothing waited on retries
    assert not (run.workdir / "data" / "seeds").exists()  # the first jobs made nothing
    assert not calls  # not even the other roles were called
