"""What a run says it paid is what the provider billed: the bill (kora.llm.money.bill), the
progress line, usage.json and `kora usage` against a loopback Anthropic server that
counts every answer and token it serves, across an uninterrupted run, a stop (SIGINT to
Snakemake alone, to its group, SIGTERM), kill -9, the plain command that resumes each, and
a budget that stops the run."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kora.llm.money.bill import bill_dir, charges, total
from tests.helpers import copy_workflow
from tests.loopback import Servers
from tests.workflows import (
    TINY,
    Server,
    command,
    config,
    loopback_env,
    snakemake,
    snakemake_argv,
    start_snakemake,
    structured_answer,
)

pytestmark = pytest.mark.slow

# dollars a million tokens; the prompt cache's prices are Anthropic's multiples of input
# (5-minute writes 1.25x, reads 0.1x), what the config would fill in, written out for the
# worst case below
PRICE = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3}
TARGET = "results/bot/results.json"
COMMAND = snakemake_argv(TARGET, configfile="run.yaml")
FIELDS = ("calls", "input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")
# seconds the server takes over each answer: long enough that a stop lands mid-run
LATENCY = 0.15


@dataclass
class Space:
    """A copy of the project whose every model is on its own counting server."""

    dir: Path
    server: Server
    runs: int = 0

    def start(self, *args: str, group: bool = False) -> subprocess.Popen[str]:
        self.runs += 1
        log = self.dir / f"run{self.runs}.log"
        return start_snakemake(
            self.dir, TARGET, *args, configfile="run.yaml", env=loopback_env(), log=log, group=group
        )

    def run(self, *args: str) -> tuple[int, str]:
        proc = self.start(*args)
        return proc.wait(timeout=600), self.log()

    def log(self) -> str:
        return (self.dir / f"run{self.runs}.log").read_text()

    def billed(self) -> dict[str, int]:
        """The workspace's bill, as `kora usage --json` prints it."""
        done = subprocess.run(
            [sys.executable, "-m", "kora.commands.main", "usage", "--json"],
            cwd=self.dir, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        billed = orjson.loads(done.stdout)["billed"]
        assert billed["calls"] == total(bill_dir(self.dir / ".kora/cache")).calls
        return {f: billed[f] for f in FIELDS}

    def run_records(self) -> list[dict[str, Any]]:
        """Each run's bill and record, oldest first, as `kora usage --runs --json` has them."""
        done = subprocess.run(
            [sys.executable, "-m", "kora.commands.main", "usage", "--runs", "--json"],
            cwd=self.dir, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs: list[dict[str, Any]] = orjson.loads(done.stdout)["byRun"]
        return runs

    def served(self) -> dict[str, int]:
        with self.server.lock:
            return {f: self.server.served[f] for f in FIELDS}

    def usage(self) -> dict[str, Any]:
        doc: dict[str, Any] = orjson.loads((self.dir / "results/bot/usage.json").read_bytes())
        return doc


@pytest.fixture
def spaces(tmp_path: Path, serve: Servers) -> Any:
    def make(name: str, cache: bool = False, **cfg: Any) -> Space:
        server = serve(Server, structured=structured_answer, latency=LATENCY)
        d = tmp_path / name
        d.mkdir()
        copy_workflow(d)
        run = config(server.url, ["bot"], ["judge"])
        run.pop("prompts_dir")
        run["grid"]["seeds_per_task"] = 3
        for m in run["models"].values():
            # a prompt cache splits the same prompt's tokens by the order calls come in:
            # off where two runs' results must cost the same
            m.update(price=PRICE, max_tokens=600, prompt_cache=cache)
        run["targets"]["gpt-target"] = None  # config.yaml's, on an unpriced model
        run.update(cfg)
        (d / "run.yaml").write_text(yaml.safe_dump(run))
        return Space(d, server)

    return make


def last_paid(log: str) -> dict[str, float]:
    """The paid figures of the run's last progress line."""
    lines = re.findall(r"^\[kora\] .*\| paid \$([\d.]+) for ([\d,]+) calls \(([\d,]+) tokens in, ([\d,]+) out\)", log, re.M)  # fmt: skip
    assert lines, log[-3000:]
    cost, calls, tin, tout = lines[-1]
    return {
        "calls": int(calls.replace(",", "")),
        "input_tokens": int(tin.replace(",", "")),
        "output_tokens": int(tout.replace(",", "")),
        "cost": float(cost),
    }


def priced(d: dict[str, Any]) -> dict[str, Any]:
    return {k: d.get(k, 0) for k in ("calls", "input_tokens", "output_tokens")}


def worst_case_usd(body: dict[str, Any]) -> float:
    """The most a request sent as `body` could cost at PRICE: its characters counted from
    its JSON (no fewer than the text the model reads) at two a token and 400 more, every
    one at the dearest price an input token can have (a cache write), and all of its
    `max_tokens` out."""
    chars = len(json.dumps(body["messages"])) + len(json.dumps(body.get("system", "")))
    chars += sum(len(json.dumps(t["input_schema"])) for t in body.get("tools", []))
    tokens_in = chars // 2 + 400
    dearest = max(PRICE["input"], PRICE["cache_write"], PRICE["cache_read"])
    return (tokens_in * dearest + body["max_tokens"] * PRICE["output"]) / 1e6


def interrupt_at(space: Space, calls: int, how: str) -> tuple[int, str, int]:
    """Start the run, stop it once the server has served `calls` answers (`how`: a signal
    to Snakemake alone, to its process group, or kill -9 of the group): its status, its
    output, and the requests the server had in flight or was answering then."""
    proc = space.start(group=how.startswith("group") or how == "kill")
    assert space.server.wait_for(lambda s: s.served["calls"] >= calls, timeout=300), space.log()
    if how == "kill":
        os.killpg(proc.pid, signal.SIGKILL)
    elif how.startswith("group"):
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM if how == "term" else signal.SIGINT)
    at = time.time()
    with space.server.lock:
        # answered or still being answered around the kill: at most these can be lost
        near = sum(1 for r in space.server.requests if r.time >= at - 2 * LATENCY - 1.0)
    status = proc.wait(timeout=300)
    return status, space.log(), near


@pytest.mark.timeout(600)
def test_an_uninterrupted_run_says_it_paid_exactly_what_the_server_served(spaces: Any) -> None:
    space = spaces("whole", cache=True)
    status, log = space.run()
    assert status == 0, log[-4000:]
    served = space.served()
    assert served["calls"] > 20 and served["cache_read_tokens"] > 0  # the prompt cache read
    assert space.billed() == served
    usage = space.usage()
    # one target, no stop: what the result rests on is what this run paid, every token
    assert priced(usage["result"]) == priced(usage["paidThisRun"]) == priced(served)
    for kind in ("cache_write_tokens", "cache_read_tokens"):
        assert usage["paidThisRun"][kind] == served[kind]
    assert last_paid(log) == {
        **priced(usage["paidThisRun"]),
        "cost": round(usage["paidThisRun"]["cost"], 4),
    }
    assert f"kora: this run paid {served['calls']:,} calls" in log


@pytest.mark.timeout(900)
@pytest.mark.parametrize("how", ["alone", "group", "term"])
def test_a_stopped_run_goes_on_with_the_same_command_and_the_bill_stays_exact(
    spaces: Any, how: str
) -> None:
    whole = spaces("whole")
    status, log = whole.run()
    assert status == 0, log[-4000:]
    reference = whole.usage()["result"]

    space = spaces("stopped")
    status, log, _ = interrupt_at(space, int(0.4 * reference["calls"]), how)
    assert status != 0 and not (space.dir / "results/bot/results.json").exists()
    assert "Traceback" not in log, log[-4000:]
    assert "KeyboardInterrupt" not in log, log[-4000:]
    tail = log[log.index("kora: this run paid") :]
    assert re.search(r"kora: the run was stopped \(SIG(INT|TERM)\): \d+ of \d+ shards", tail)
    go_on = re.search(r"^kora: to go on: (.*)$", tail, re.M)
    assert go_on is not None and shlex.split(go_on.group(1))[1:] == COMMAND[3:]
    stopped_bill = space.billed()
    # a stop lets the requests in flight end: every answer served is in the bill
    assert stopped_bill == space.served()
    assert 0 < stopped_bill["calls"] < reference["calls"]
    stopped = space.run_records()[-1]
    assert stopped["outcome"] == ("SIGTERM" if how == "term" else "SIGINT")
    assert stopped["targets"] == ["bot"] and shlex.split(stopped["command"])[1:] == COMMAND[3:]

    status, log = space.run()  # the plain command, as printed
    assert status == 0, log[-4000:]
    assert [r["outcome"] for r in space.run_records()] == [stopped["outcome"], "finished"]
    assert space.billed() == space.served()  # both attempts, to the token
    usage = space.usage()
    assert usage["result"] == reference  # the result costs what it costs, stop or not
    # the resumed run's own bill: the last progress line and usage.json agree
    assert last_paid(log) == {
        **priced(usage["paidThisRun"]),
        "cost": round(usage["paidThisRun"]["cost"], 4),
    }
    assert usage["paidThisRun"]["calls"] + stopped_bill["calls"] >= reference["calls"]


@pytest.mark.timeout(900)
def test_after_kill_9_the_plain_command_resumes_and_only_calls_in_flight_are_unbilled(
    spaces: Any,
) -> None:
    space = spaces("killed")
    status, log, near = interrupt_at(space, 20, "kill")
    assert status == -signal.SIGKILL
    assert list((space.dir / ".snakemake/locks").glob("*.lock")), "no lock left to clear"
    status, log = space.run()
    assert status == 0, log[-4000:]
    assert "kora: removed .snakemake/locks" in log or "left by a run that was killed" in log
    killed, resumed = space.run_records()
    assert killed["started"] and (killed["ended"], killed["outcome"]) == (None, None)
    assert resumed["outcome"] == "finished"
    served, billed = space.served(), space.billed()
    lost = served["calls"] - billed["calls"]
    assert 0 <= lost <= near, (served, billed, near)


@pytest.mark.timeout(900)
def test_a_budget_stops_the_run_within_one_call_and_a_higher_one_goes_on(
    spaces: Any,
) -> None:
    whole = spaces("whole")
    status, log = whole.run()
    assert status == 0, log[-4000:]
    estimate = whole.usage()["result"]["cost"]

    space = spaces("budget", budget={"usd": round(estimate / 2, 4)})
    status, log = space.run()
    assert status != 0 and not (space.dir / "results/bot/results.json").exists()
    assert "Traceback" not in log, log[-4000:]
    bill = list(charges(bill_dir(space.dir / ".kora/cache")))
    spent = sum(c.counts.cost for c in bill)
    budget = round(estimate / 2, 4)
    # never past it, and stopped within one call's worst case of it, for the largest
    # request of the whole run (the call that found no room may be one this run never paid
    # for: calls made ahead reach the budget in no fixed order). What a call reads is its
    # system prompt, its messages and its answer's schema: the server's token count leaves
    # the schema out, so the bound counts the request's JSON
    sent = [
        r.body for r in whole.server.requests if isinstance(r.body, dict) and "messages" in r.body
    ]
    worst = max(worst_case_usd(body) for body in sent)
    assert spent <= budget
    # it stopped because a call's worst case did not fit, and it says which
    need = re.search(r"the run stopped at its budget: .*could cost up to \$([0-9]+\.[0-9]+)", log)
    assert need is not None, log[-3000:]
    assert budget - spent < float(need.group(1)) + 1e-4 <= worst + 2e-4, (budget, spent, worst)
    assert space.billed() == space.served()
    said = re.search(r"^kora: .*raise the budget: (.*)$", log, re.M)
    assert said is not None, log[-3000:]
    assert "the run stopped at its budget" in log
    assert [r["outcome"] for r in space.run_records()] == ["budget"]
    done = command(space.dir, said.group(1), env=dict(os.environ, ANTHROPIC_API_KEY="test-key"))
    assert done.returncode == 0, done.stderr[-4000:]
    assert space.billed() == space.served()
    assert space.usage()["result"]["cost"] == pytest.approx(estimate)


@pytest.mark.timeout(900)
def test_usage_json_prices_the_results_calls_as_the_bill_does_after_a_price_change(
    tmp_path: Path,
) -> None:
    """What a result cost is what the bill says its calls cost when they were paid: run
    again at another price, every answer from the call store, usage.json, `kora usage`
    and the bill agree; a shard's status file keeps no copy of the figures."""
    copy_workflow(tmp_path)

    def run(price: dict[str, float]) -> dict[str, Any]:
        cfg = dict(TINY, models={"mock": {"provider": "mock", "price": price}})
        (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
        done = snakemake(tmp_path, "results/tiny/results.json")
        assert done.returncode == 0, done.stderr[-3000:]
        doc: dict[str, Any] = orjson.loads((tmp_path / "results/tiny/usage.json").read_bytes())
        return doc

    first = run({"input": 3.0, "output": 15.0})
    bill = total(bill_dir(tmp_path / ".kora/cache"))
    assert first["result"]["cost"] == round(bill.cost, 6) > 0
    # the shards and the result made again, at twice the price: nothing new is paid
    for made in ("data/seeds", "data/scenarios", "results"):
        shutil.rmtree(tmp_path / made)
    again = run({"input": 6.0, "output": 30.0})
    assert again["paidThisRun"]["calls"] == 0 and again["asked"]["cached"] > 0
    assert again["result"] == first["result"]
    assert total(bill_dir(tmp_path / ".kora/cache")) == bill
    assert again["costByStage"] == first["costByStage"]
    statuses = [
        *(tmp_path / "data").rglob("*.status.json"),
        *(tmp_path / "results").rglob("*.status.json"),
    ]
    assert statuses
    for status in statuses:
        doc = orjson.loads(status.read_bytes())
        assert all(len(row) == 3 for row in doc.get("calls", [])), status
        assert all("cost" not in row for row in doc.get("usage", [])), status
