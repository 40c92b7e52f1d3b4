"""kill -9 at random points of a run: nothing finished is lost or paid for twice."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
import yaml

from tests.loopback import Servers
from tests.workflows import (
    Server,
    config,
    loopback_env,
    snakemake,
    start_snakemake,
    structured_answer,
    with_prompts,
)

# the run each test starts, kills and starts again
ARGS = ("results/t1/results.json", "--rerun-incomplete")


def _unlock(workdir: Path, env: dict[str, str]) -> None:
    """What the README says to run first after a kill."""
    snakemake(workdir, "--unlock", *ARGS, configfile="run.yaml", env=env, timeout=120)


def _finish(workdir: Path, env: dict[str, str]) -> None:
    """The README's way after a kill: unlock, then the same command; it must succeed."""
    _unlock(workdir, env)
    final = snakemake(workdir, *ARGS, configfile="run.yaml", env=env)
    assert final.returncode == 0, final.stderr[-3000:]
    results = orjson.loads((workdir / "results/t1/results.json").read_bytes())
    assert results["failedTests"] == 0 and results["tests"] > 0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_kill_9_loses_nothing_and_repays_at_most_the_calls_in_flight(
    tmp_path: Path, serve: Servers
) -> None:
    # each kill comes once the server has had a few more requests (never after a time:
    # the run lands mid-way on a loaded machine as on an idle one); answers take 0.3 s,
    # so calls are out when it comes
    server = serve(Server, structured=structured_answer, latency=0.3)
    with_prompts(tmp_path)
    cfg = config(server.url, ["t1"], ["judge"])
    cfg["grid"]["motivations"] = ["curiosity_exploration", "boredom_sensation_seeking"]
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    env = loopback_env()
    rng = random.Random(5)
    in_flight_at_kills = 0
    kills = 0
    kill_times: list[float] = []
    # when each run after a kill started: a request the killed run had already written
    # reaches the server after the kill, but always before the next run starts (the
    # server has answered everything out, and --unlock has run, by then)
    next_starts: list[float] = []
    for _ in range(4):
        _unlock(tmp_path, env)
        next_starts.append(time.time())
        proc = start_snakemake(tmp_path, *ARGS, configfile="run.yaml", env=env, group=True)
        target = server.count + rng.randint(5, 25)
        # until the server has had that many more requests, or the run has ended (a
        # check each second: an ended run makes no request to wake the wait)
        while not server.wait_for(lambda s, t=target: s.count >= t, 1.0):
            if proc.poll() is not None:
                break
        if proc.poll() is not None:
            break
        in_flight_at_kills += server.in_flight
        kill_times.append(time.time())
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        # the server finishes answering the dead client before the next run starts
        assert server.wait_for(lambda s: s.in_flight == 0, 60)
    assert kills >= 1, "the run finished before any kill: make it longer"
    next_starts.append(time.time())
    _finish(tmp_path, env)
    bodies: Counter[str] = Counter()
    first_seen: dict[str, float] = {}
    for r in server.requests:
        h = hashlib.sha256(orjson.dumps(r.body, option=orjson.OPT_SORT_KEYS)).hexdigest()
        bodies[h] += 1
        first_seen.setdefault(h, r.time)
    paid_twice = sum(n - 1 for n in bodies.values())
    print(f"kills={kills} requests={len(server.requests)} unique={len(bodies)} "
          f"paid_twice={paid_twice} server_in_flight_at_kills={in_flight_at_kills} "
          f"max_in_flight={server.max_in_flight}")  # fmt: skip
    # Every call paid twice was in flight when a kill came: first seen by the server
    # less than its answer time (latency + a margin for a loaded machine's store write)
    # before that kill, or after it but before the next run started (already on the wire).
    windows = [
        (k - server.latency - 1.0, s) for k, s in zip(kill_times, next_starts[1:], strict=False)
    ]
    for h, n in bodies.items():
        if n > 1:
            assert any(lo <= first_seen[h] < hi for lo, hi in windows), (first_seen[h], windows)
    # Never a wholesale re-run: a kill costs at most the calls a run has out at once
    # (a share of all calls would depend on how long answers take against the run)
    assert paid_twice <= kills * server.max_in_flight


@pytest.mark.slow
def test_kill_9_during_a_batch_run_resumes_its_batches_and_pays_nothing_twice(
    tmp_path: Path, serve: Servers
) -> None:
    """The judges in batch mode: the run is killed while a batch is out; the same command
    afterwards waits for that batch (its id was stored before waiting) and sends none of
    its requests again."""
    server = serve(Server, structured=structured_answer)
    server.batch_latency = 6.0
    with_prompts(tmp_path)
    cfg = config(server.url, ["t1"], ["judge"])
    cfg["models"]["judge"]["batch"] = True
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    env = loopback_env(KORA_BATCH_WINDOW="0.5", KORA_BATCH_POLL="0.5")
    proc = start_snakemake(tmp_path, *ARGS, configfile="run.yaml", env=env, group=True)
    # the batch is sent once the server has its POST: kill then, while it is out
    assert server.wait_for(
        lambda s: any(r.path == "/v1/messages/batches" and r.method == "POST"
                      for r in s.requests), 300), "no batch was sent"  # fmt: skip
    batches = tmp_path / ".kora" / "batches"
    assert server.wait_for(lambda s: bool(list(batches.glob("*.json"))), 60)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _finish(tmp_path, env)
    sent: Counter[str] = Counter()
    for r in server.requests:
        if r.method == "POST" and r.path == "/v1/messages/batches":
            sent.update(q["custom_id"] for q in r.body["requests"])
    assert sent and max(sent.values()) == 1  # every judge question in one batch only
    assert not any(r.path == "/v1/messages" and r.body.get("model") == "claude-judge"
                   for r in server.requests)  # fmt: skip
