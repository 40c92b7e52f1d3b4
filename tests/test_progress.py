"""The run's progress line: its total, and what it shows while calls wait to retry."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from kora.llm import retry
from kora.llm.base import ChatMessage, ProviderError, Request, Response
from kora.llm.client import ModelClient
from kora.llm.money.usage import Usage
from kora.llm.providers.factories import Shared
from kora.llm.retry import RetryPolicy
from kora.run.jobs.progress import Totals, format_totals
from kora.run.plan import count_jobs
from kora.run.workflow.pipeline import Pipeline
from tests.helpers import copy_workflow, record_truncations
from tests.workflows import lines_add_up


class FailsThenAnswers:
    name = "flaky"

    def __init__(self, failures: int) -> None:
        self.failures = failures

    async def generate(self, request: Request) -> Response:
        if self.failures:
            self.failures -= 1
            raise ProviderError("model 'm': HTTP 529: overloaded", status=529)
        return Response(text="ok")

    def should_retry(self, exc: BaseException) -> bool:
        return True

    async def aclose(self) -> None:
        return None


def test_a_call_waiting_to_retry_is_counted_while_it_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    from kora.llm.settings.config import ModelConfig

    monkeypatch.setattr(retry, "_testing", False)
    usage = Usage()
    client = ModelClient(
        "m",
        ModelConfig(provider="mock"),
        Shared(usage=usage, fixed={"m": FailsThenAnswers(1)}),
        retry_policy=RetryPolicy(initial=0.4, jitter=0.0),
    )
    seen: list[tuple[int, str]] = []

    async def main() -> None:
        call = asyncio.create_task(client.text([ChatMessage("user", "hi")], stage="t"))
        while not usage.waiting and not call.done():
            await asyncio.sleep(0.01)  # polled until the call has failed once and waits
        seen.append((usage.waiting, usage.last_retry))
        assert await call == "ok"
        seen.append((usage.waiting, usage.last_retry))

    asyncio.run(main())
    assert seen[0][0] == 1 and "529" in seen[0][1]
    assert seen[1][0] == 0


def test_the_line_says_calls_are_waiting_and_why() -> None:
    line = format_totals(Totals(calls=10, waiting=3, last_retry="model 'm': HTTP 529"), 100)
    assert "3 waiting to retry (model 'm': HTTP 529)" in line
    assert "waiting" not in format_totals(Totals(calls=10), 100)


def test_the_line_says_the_share_of_the_run_answered_and_what_was_paid() -> None:
    """Issue 58: `calls 32/5268 ... | paid 4080 calls, ..., $23.9141 | 2975 of them made
    ahead` hid what share of the run was done. The calls made ahead of their jobs are
    answers in hand: the line counts them as answered (paid, as they arrive), gives the
    share, puts the dollars first, and leaves what "made ahead" means to the run's first
    lines."""
    from kora.llm.money.usage import Counts

    paid = Counts(calls=4080, input_tokens=6_192_361, output_tokens=355_803, cost=23.9141)
    t = Totals(calls=32, cached=0, shards_done=32, paid=paid)
    line = format_totals(t, 5268, 400)
    assert line.startswith("[kora] calls 4,080 of 5,268 answered (77%)"), line
    assert "| shards 32 of 400 done |" in line
    assert "| paid $23.9141 for 4,080 calls (6,192,361 tokens in, 355,803 out)" in line
    assert "made ahead" not in line and "failed" not in line
    assert ", 3 failed" in format_totals(Totals(calls=10, failures=3), 100)


def test_the_line_projects_the_runs_total_from_what_each_kind_of_call_cost(
    tmp_path: Path,
) -> None:
    """Once a run has paid for answers, its line says what it will have paid at its end:
    each kind of call's calls still to come at what its calls have cost so far, a kind
    not yet begun at the plan's figure scaled as the kinds begun came out against theirs
    (issue 58: the plan at typical lengths ran 3 x a server's bill)."""
    from kora.llm.money.bill import BillWriter
    from kora.llm.money.usage import Counts
    from kora.llm.settings.config import Price
    from kora.run.jobs.progress import Monitor
    from kora.run.plan import STORED, Share, still_to_pay

    price = Price(input=3.0, output=15.0)
    bill = BillWriter(tmp_path / "bill", "run")
    for _ in range(2):  # 2 of the 10 judge calls paid, at $0.0045 each
        bill.charge("m", "judge_safety", Response("x", 1000, 100), price, key=None)
    # the plan thought a judge call $0.0015, a seeds call $0.002
    shares = [
        Share("judgments", "judge_safety", STORED, 10, Counts(calls=10, cost=0.015), Counts()),
        Share("seeds", "seeds", STORED, 5, Counts(calls=5, cost=0.01), Counts()),
    ]
    monitor = Monitor(tmp_path, "run", bill=tmp_path / "bill")
    monitor.planned = 15
    monitor.project = lambda paid: (
        sum(c.cost for c in paid.values()) + (still_to_pay(shares, "usd", paid)[0])
    )
    t = monitor.totals()
    assert t.paid.cost == pytest.approx(0.009)
    t.projected = monitor.project(monitor.bill.by_kind)
    # the judge calls cost 3 x the plan's figure: the seeds are thought 3 x theirs too
    assert t.projected == pytest.approx(0.009 + 8 * 0.0045 + 3 * 0.01)
    assert f"about ${t.projected:,.2f} by the run's end" in format_totals(t, 15, 2)


def test_the_total_counts_the_calls_of_the_jobs_to_run_only(tmp_path: Path) -> None:
    copy_workflow(tmp_path)  # a project with no shards made yet
    plan = Pipeline.load(workdir=tmp_path)
    wc = {
        "risk": "violence_and_physical_harm",
        "age": "7to9",
        "motivation": "curiosity_exploration",
    }
    n = plan.config.grid.seeds_per_task
    prompts = len(plan.config.target_prompts("gpt-target"))
    t = dict(wc, target="gpt-target")

    def count(*jobs: tuple[str, dict[str, str]]) -> int:
        return asyncio.run(count_jobs(plan, [plan.job_spec(rule, w) for rule, w in jobs])).calls

    # nothing stored, real models: each job at its nominal count, and a seeds call that
    # is not known yet counts the scenarios, tests and judgments it would give
    assert count(("seeds", wc)) == 1
    assert count(("seeds", wc), ("scenarios", wc)) == 1 + 3 * n
    judged = 2 * len(plan.config.judges) * n * prompts
    assert count(("seeds", wc), ("scenarios", wc), ("conversations", t), ("judgments", t)) == (
        1 + 3 * n + 5 * n * prompts + judged
    )


@pytest.mark.timeout(30)
def test_the_line_says_what_the_bill_says_and_never_counts_twice(tmp_path: Path) -> None:
    """The paid figures are the run's bill, not the jobs' snapshots: a call made ahead
    and then used by its job is one paid call (the line once said 1.5x the tokens)."""
    from kora.benchmarks.layout import progress_dir
    from kora.llm.money.bill import BillWriter
    from kora.llm.settings.config import Price
    from kora.llm.store.files import write_over
    from kora.run.jobs.progress import Monitor

    bill = BillWriter(tmp_path / "bill", "run")
    price = Price(input=3.0, output=15.0)
    bill.charge("m", "judge", Response("x", 1000, 100), price, key="k1", ahead=True)
    bill.charge("m", "judge", Response("y", 500, 50), price, key="k2")
    snapshots = progress_dir(tmp_path, "run")
    # the job that used both (one made ahead, one its own)
    write_over(
        snapshots / "job.json",
        orjson.dumps({"stage": "judgments", "calls": 2, "input_tokens": 1500, "closed": True}),
    )
    monitor = Monitor(tmp_path, "run", bill=tmp_path / "bill")
    monitor.planned = 2
    monitor.shards = 1
    t = monitor.totals()
    assert (t.paid.calls, t.paid.input_tokens, t.paid.output_tokens) == (2, 1500, 150)
    assert t.paid.cost == pytest.approx((1500 * 3 + 150 * 15) / 1e6)
    line = format_totals(t, 2, 1)
    assert "calls 2 of 2 answered (100%), 0 from the call store | shards 1 of 1 done" in line
    assert f"paid ${t.paid.cost:.4f} for 2 calls (1,500 tokens in, 150 out)" in line
    # read again: nothing new, nothing counted twice
    assert monitor.totals().paid == t.paid
    bill.charge("m", "judge", Response("z", 10, 1), price, key="k3")
    assert monitor.totals().paid.calls == 3
    # a total below what is done already grows to it
    assert "calls 2 of 2 " in format_totals(t, 1, 1)


@pytest.mark.timeout(60)
def test_ping_names_a_missing_key_and_sends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kora.commands.ping import ping_all
    from kora.config.checks import validate_config
    from tests.helpers import copy_workflow

    copy_workflow(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    plan = Pipeline.load(workdir=tmp_path)
    cfg = validate_config(plan.config.model_dump(exclude_none=True), plan.taxonomy)
    lines, failed, unsent = asyncio.run(ping_all(cfg, "gpt-target", roles=False))
    assert (failed, unsent) == (0, 1)
    assert lines == ["target gpt: not sent: set OPENAI_API_KEY (model 'gpt') first"]


@pytest.mark.timeout(30)
def test_a_snapshot_is_written_over_without_emptying_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot goes over the last one in place, and its file is never cut to nothing
    first: emptying it frees its block, which a file system mounted with `discard` hands
    back to the disk while the broker's event loop waits (kora/llm/store/files.py)."""
    from kora.llm.store import files

    cut_to = record_truncations(monkeypatch)
    path = tmp_path / "snap.json"
    files.write_over(path, b'{"calls": 1000, "last_retry": "a long reason"}')
    files.write_over(path, b'{"calls": 1001}')
    assert path.read_bytes() == b'{"calls": 1001}'
    files.write_over(path, b'{"calls": 1002, "waiting": 3}')
    assert path.read_bytes() == b'{"calls": 1002, "waiting": 3}'
    assert 0 not in cut_to


def test_a_jobs_snapshot_carries_every_counter_to_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a job's snapshot says it asked for is what the run's line adds up."""
    from types import SimpleNamespace

    from kora.benchmarks.layout import progress_dir
    from kora.run.jobs.progress import RUN_ENV, ProgressReporter, Snapshots

    monkeypatch.setenv(RUN_ENV, "run-1")
    usage = Usage()
    usage.add("m", "expand")
    usage.add("m", "expand", cached=True)
    usage.add("m", "validate", failed=True)
    usage.add_unstored("m", "validate")
    report = SimpleNamespace(stage="scenarios", shard="a/b/c", items=3, done=2, failed=1)

    async def a_job() -> None:  # a job's reporter lives on its event loop
        ProgressReporter(usage, tmp_path, report).close()

    asyncio.run(a_job())

    (snapshot,) = progress_dir(tmp_path, "run-1").glob("*.json")
    assert orjson.loads(snapshot.read_bytes()).items() >= usage.totals().items()
    t = Snapshots(progress_dir(tmp_path, "run-1")).totals()
    assert (t.calls, t.cached, t.failures, t.unstored) == (3, 1, 1, 1)
    assert (t.shards, t.shards_done, t.shards_failed) == (1, 1, 1)


@pytest.mark.timeout(30)
def test_the_line_reads_a_snapshot_again_only_once_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole grid's run ends with 3,000 snapshots: the line reads the changed ones."""
    from kora.run.jobs import progress
    from kora.run.jobs.progress import Snapshots

    def snap(name: str, calls: int, when: int) -> None:
        path = tmp_path / f"{name}.json"
        path.write_bytes(orjson.dumps({"stage": "seeds", "calls": calls, "closed": False}))
        os.utime(path, ns=(when, when))

    snap("a", 1, 10**18)
    snap("b", 2, 10**18)
    reads: list[str] = []
    real = progress._read
    monkeypatch.setattr(progress, "_read", lambda p: reads.append(p) or real(p))
    snapshots = Snapshots(tmp_path)
    assert snapshots.totals().calls == 3
    assert snapshots.totals().calls == 3
    assert len(reads) == 2  # the second line read nothing again
    snap("b", 5, 10**18 + 1)  # rewritten in place, the same size
    assert snapshots.totals().calls == 6
    assert len(reads) == 3
    (tmp_path / "a.json").unlink()
    assert snapshots.totals().calls == 5
    assert Snapshots(tmp_path).totals().calls == 5  # without a reader's memory: all read


@pytest.mark.timeout(30)
def test_a_closed_snapshot_is_counted_once_and_never_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's last snapshot never changes: the line adds it once, and later lines
    neither `stat` nor read it, while an open one's news still show."""
    from kora.run.jobs import progress
    from kora.run.jobs.progress import Snapshots

    def snap(name: str, closed: bool, **counts: int) -> None:
        body = {"stage": "seeds", "closed": closed, **counts}
        (tmp_path / f"{name}.json").write_bytes(orjson.dumps(body))

    snap("done", True, calls=4, cached=1, items_failed=1)
    snap("going", False, calls=2, waiting=1)
    reads: list[str] = []
    real = progress._read
    monkeypatch.setattr(progress, "_read", lambda p: reads.append(p) or real(p))
    snapshots = Snapshots(tmp_path)
    first = snapshots.totals()
    assert (first.calls, first.cached, first.shards, first.shards_done) == (6, 1, 2, 1)
    assert (first.shards_failed, first.waiting) == (1, 1)
    snap("going", False, calls=9)  # still at work
    # were the closed one looked at again, its garbled file would drop it from the line
    (tmp_path / "done.json").write_bytes(b"{not json")
    later = snapshots.totals()
    assert (later.calls, later.cached, later.shards, later.shards_done) == (13, 1, 2, 1)
    assert (later.shards_failed, later.waiting) == (1, 0)
    assert sorted(Path(r).name for r in reads) == ["done.json", "going.json", "going.json"]


@pytest.mark.timeout(30)
def test_the_lines_counts_add_up_at_every_moment_of_a_run(tmp_path: Path) -> None:
    """Issue 58: mid-run the line read `calls 539 answered, 18 from the call store | ...
    paid ... for 954 calls`, and once `881 of 881` where the run had 833: the calls made
    ahead of their jobs were counted from the broker's count, written once a second, and
    again from each job's snapshot as the job used them. A run's moments, one after
    another, as the line reads them: at each, answered = paid this run + from the call
    store, never above the run's total, and a call made ahead counted once."""
    from kora.benchmarks.layout import progress_dir
    from kora.llm.money.bill import BillWriter
    from kora.llm.settings.config import Price
    from kora.llm.store.files import write_over
    from kora.run.jobs.progress import Monitor

    price = Price(input=3.0, output=15.0)
    bill = BillWriter(tmp_path / "bill", "run")
    snapshots = progress_dir(tmp_path, "run")
    monitor = Monitor(tmp_path, "run", bill=tmp_path / "bill")
    monitor.planned = 4

    def snapshot(name: str, **counts: Any) -> None:
        write_over(snapshots / f"{name}.json", orjson.dumps(counts))

    def sample() -> tuple[int, int, int, int]:
        (counts,) = lines_add_up(format_totals(monitor.totals(), 4, 2))
        return counts

    # one answer stored by an earlier run, found by the first job
    snapshot("job1", stage="seeds", calls=1, cached=1)
    assert sample() == (1, 4, 1, 0)
    # two calls made ahead arrive: billed, and answered, at once
    bill.charge("m", "expand", Response("a", 10, 1), price, key="k1", ahead=True)
    bill.charge("m", "expand", Response("b", 10, 1), price, key="k2", ahead=True)
    assert sample() == (3, 4, 1, 2)
    # the second job uses them: its snapshot counts them as its paid calls
    snapshot("job2", stage="scenarios", calls=2, cached=0)
    assert sample() == (3, 4, 1, 2)
    # a question asked again in the run: answered from the store, not paid again
    snapshot("job2", stage="scenarios", calls=3, cached=1, closed=True)
    assert sample() == (4, 4, 2, 2)
