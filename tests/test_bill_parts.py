"""The bill and the budget, part by part: against loopback servers that count what they
serve (Message Batches of both providers, retries, answers that miss their schema or are
too large), the budget's reservations, `kora usage`, the command printed to go on, and
the locks a killed Snakemake leaves."""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from kora.llm import registry
from kora.llm.answers import StructuredOutputError
from kora.llm.base import ChatMessage, Request, Response
from kora.llm.client import ModelClient
from kora.llm.money.bill import BillWriter, bill_dir, charges, total
from kora.llm.money.budget import Budget, BudgetReached, worst_case
from kora.llm.money.usage import Counts
from kora.llm.providers import batch as batch_mod
from kora.llm.providers.factories import Shared
from kora.llm.retry import RetryPolicy
from kora.llm.settings.config import ModelConfig, Price
from kora.llm.shared_calls import SharedCalls
from kora.llm.store.cache import CallCache
from tests.helpers import record_truncations
from tests.loopback import INVALID, SERVER_ERROR, AnthropicServer, Fault, OpenAIServer

PRICE = Price(input=3.0, output=15.0)
FAST = RetryPolicy(attempts=4, initial=0.01, maximum=0.05)
KINDS = ("calls", "input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")


class Answer(BaseModel):
    answer: str


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-loop")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loop")
    monkeypatch.setattr(batch_mod, "WINDOW", 0.05)
    monkeypatch.setattr(batch_mod, "POLL", 0.05)
    batch_mod._QUEUES.clear()


def client(srv: Any, tmp: Path, **cfg: Any) -> ModelClient:
    openai = isinstance(srv, OpenAIServer)
    config = ModelConfig(
        provider="openai" if openai else "anthropic",
        model="gpt-x" if openai else "claude-x",
        base_url=f"{srv.url}/v1" if openai else srv.url,
        price=PRICE,
        **cfg,
    )
    store = CallCache(tmp / "cache")
    return ModelClient(
        "m",
        config,
        Shared(
            store=store, shared_calls=SharedCalls(), bill=BillWriter(bill_dir(store.root), "run")
        ),
        retry_policy=FAST,
    )


def ask(c: ModelClient, n: int, structured: bool = True) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return await asyncio.gather(
                *(
                    c.structured([ChatMessage("user", f"question {i} " * 300)], Answer, stage="t")
                    if structured
                    else c.text([ChatMessage("user", f"question {i} " * 300)], stage="t")
                    for i in range(n)
                ),
                return_exceptions=True,
            )
        finally:
            await c.aclose()

    return asyncio.run(go())


def billed(tmp: Path) -> dict[str, int]:
    t = total(bill_dir(tmp / "cache"))
    return {k: getattr(t, k) for k in KINDS}


def served(srv: Any) -> dict[str, int]:
    return {k: srv.served[k] for k in KINDS}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", [AnthropicServer, OpenAIServer])
def test_a_batch_is_billed_as_the_server_served_it_at_half_price(
    tmp_path: Path, kind: type
) -> None:
    with kind() as srv:
        results = ask(client(srv, tmp_path, batch=True, prompt_cache=False), 6)
        assert all(isinstance(r, Answer) for r in results), results
        assert billed(tmp_path) == served(srv) and srv.served["calls"] == 6
        lines = list(charges(bill_dir(tmp_path / "cache")))
        assert all(c.batch for c in lines)
        t = total(bill_dir(tmp_path / "cache"))
        assert t.cost == pytest.approx((t.input_tokens * 1.5 + t.output_tokens * 7.5) / 1e6)


@pytest.mark.timeout(120)
def test_a_batchs_price_is_the_provider_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch discount is a fact of the provider table (kora.llm.registry): a provider
    whose batches cost a quarter of a single call is billed a quarter."""
    quarter = dataclasses.replace(registry.KINDS["anthropic"], batch_price=0.25)
    monkeypatch.setitem(registry.KINDS, "anthropic", quarter)
    with AnthropicServer() as srv:
        results = ask(client(srv, tmp_path, batch=True, prompt_cache=False), 4)
        assert all(isinstance(r, Answer) for r in results), results
        assert billed(tmp_path) == served(srv) and srv.served["calls"] == 4
    t = total(bill_dir(tmp_path / "cache"))
    assert t.cost == pytest.approx((t.input_tokens * 0.75 + t.output_tokens * 3.75) / 1e6)


@pytest.mark.timeout(120)
def test_each_answer_is_priced_once_and_the_budget_spends_what_the_bill_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's cost is computed once, when its answer arrives: the bill writes it, the
    budget counts it as written, and the job keeps no copy of it (its status file says
    which calls it asked for and rests on, the bill what they cost)."""
    priced: list[Response] = []
    paid = Counts.paid.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Counts], resp: Response, price: Price | None) -> Counts:
        priced.append(resp)
        return paid(cls, resp, price)  # type: ignore[no-any-return]

    monkeypatch.setattr(Counts, "paid", classmethod(counted))
    budget = Budget.start(tmp_path / "b.json", "usd", limit=10.0, billed=0.0)
    with AnthropicServer() as srv:
        c = client(srv, tmp_path)
        c.payer = dataclasses.replace(c.payer, budget=budget)
        ask(c, 3)
        served_calls = srv.served["calls"]
    assert served_calls == 3 and len(priced) == 3
    bill = total(bill_dir(tmp_path / "cache"))
    assert budget.spent() == pytest.approx(bill.cost) and bill.cost > 0
    assert {len(row) for row in c.usage.used_records()} == {3}  # key, model, kind of call
    rows = c.usage.records()
    assert rows == [{"model": "m", "stage": "t", "calls": 3, "cached": 0, "failures": 0}]


@pytest.mark.timeout(120)
def test_retries_and_answers_that_miss_their_schema_are_billed_as_served(
    tmp_path: Path, anthropic_server: AnthropicServer
) -> None:
    """A 500 or a 529 serves nothing; an answer that missed its schema was served and
    paid, though no result uses it."""
    anthropic_server.script(SERVER_ERROR, Fault.http(529), INVALID, INVALID)
    results = ask(client(anthropic_server, tmp_path, prompt_cache=False), 4)
    assert sum(isinstance(r, StructuredOutputError) for r in results) <= 1
    assert billed(tmp_path) == served(anthropic_server)
    assert anthropic_server.statuses[500] == 1 and anthropic_server.statuses[529] == 1


@pytest.mark.timeout(120)
def test_the_prompt_cache_is_billed_as_the_server_counted_it(
    tmp_path: Path, anthropic_server: AnthropicServer
) -> None:
    long_system = "You are a careful assistant. " * 400

    async def go() -> None:
        c = client(anthropic_server, tmp_path, prompt_cache=True)
        for i in range(3):
            await c.text([ChatMessage("user", f"q{i}")], stage="t", system=long_system)
        await c.aclose()

    asyncio.run(go())
    got = billed(tmp_path)
    assert got == served(anthropic_server)
    assert got["cache_write_tokens"] > 0 and got["cache_read_tokens"] > 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("drained", [True, False], ids=["asked-after", "asked-while-out"])
def test_a_request_sent_is_billed_and_stored_though_its_caller_is_cancelled(
    tmp_path: Path, drained: bool
) -> None:
    """A job cut short (its script went away, the run stopped) while its request is out:
    the answer still arrives, is billed and stored, and the next ask is answered from the
    store; one asked while that request is still out waits for it rather than paying for
    a second answer."""
    # the slower answer keeps the first request out while the second question is asked
    with AnthropicServer(latency=0.3 if drained else 2.0) as srv:
        c = client(srv, tmp_path, prompt_cache=False)
        request = c.request([ChatMessage("user", "hello")])

        async def go() -> Response:
            call = asyncio.create_task(c.call(request, stage="t"))
            await asyncio.to_thread(srv.wait_for, lambda s: s.in_flight == 1, 30)
            call.cancel()
            assert c.shared_calls is not None
            if drained:
                await c.shared_calls.drain()
            again = await c.call(request, stage="t")
            await c.aclose()
            return again

        again = asyncio.run(go())
        assert again.meta.get("cached") and srv.served["calls"] == 1
        assert billed(tmp_path) == served(srv)


@pytest.mark.timeout(60)
def test_the_budget_holds_each_calls_worst_case_and_stops_when_none_fits(
    tmp_path: Path,
) -> None:
    budget = Budget.start(tmp_path / "b.json", "usd", limit=1.0, billed=0.5)
    price = Price(input=100.0, output=100.0)
    request = Request(messages=(ChatMessage("user", "x" * 400),), max_tokens=1000)
    worst = worst_case(request, price)
    # (400 / 2 + 400 overhead) + 1000 out, at $100 a million: $0.16
    assert worst.cost == pytest.approx(0.16)

    async def go() -> None:
        held = [await budget.reserve(worst) for _ in range(3)]  # 0.5 + 3 x 0.16 = 0.98
        fourth = asyncio.create_task(budget.reserve(worst))
        await asyncio.sleep(0)
        assert not fourth.done()  # waits: the others may cost less than they hold
        # each answer cost $0.01: the fourth fits now
        for h in held:
            budget.settle(h, Counts.paid(Response("", 50, 50), price))
        settled = await fourth
        budget.settle(settled, Counts.paid(Response("", 50, 50), price))
        assert budget.spent() == pytest.approx(0.54)
        # nothing in flight, and the next worst case does not fit: reached, for every call
        big = Request(messages=(ChatMessage("user", "x"),), max_tokens=5000)
        with pytest.raises(BudgetReached, match=r"\$0.5400 billed of \$1.0000"):
            await budget.reserve(worst_case(big, price))
        # this one would fit, but the run has stopped: it names the call that found no
        # room, so what the run says adds up (billed + that worst case is past the limit)
        with pytest.raises(BudgetReached, match=r"could cost up to \$0.5400") as refused:
            await budget.reserve(worst)
        assert refused.value.spent + refused.value.need > refused.value.limit

    asyncio.run(go())


@pytest.mark.timeout(60)
def test_the_budgets_file_is_rewritten_in_place_never_emptied_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each call updates the budget's file twice; cut to nothing before each write, the
    file freed its block every time, which a disk mounted with `discard` waits for."""
    cut_to = record_truncations(monkeypatch)
    budget = Budget.start(tmp_path / "b.json", "usd", limit=1.0, billed=0.25)
    price = Price(input=100.0, output=100.0)
    worst = worst_case(Request(messages=(ChatMessage("user", "x"),), max_tokens=10), price)

    async def go() -> None:
        held = [await budget.reserve(worst) for _ in range(3)]
        for h in held:  # the held amounts leave the file: it gets shorter each time
            budget.settle(h, Counts.paid(Response("", 1, 1), price))

    asyncio.run(go())
    state = json.loads((tmp_path / "b.json").read_bytes())
    assert state["held"] == {} and state["spent"] == pytest.approx(0.25 + 3 * 200 / 1e6)
    assert cut_to and 0 not in cut_to


@pytest.mark.timeout(60)
def test_a_killed_processs_reservation_is_given_back(tmp_path: Path) -> None:
    budget = Budget.start(tmp_path / "b.json", "tokens", limit=1000, billed=0)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    state = json.loads((tmp_path / "b.json").read_text())
    state["held"] = {f"{os.uname().nodename}:{gone}": 900}
    (tmp_path / "b.json").write_text(json.dumps(state))
    request = Request(messages=(ChatMessage("user", "x"),), max_tokens=300)
    assert asyncio.run(budget.reserve(worst_case(request, None))) == 700


@pytest.mark.timeout(60)
def test_kora_usage_sums_the_bill_by_model_kind_and_day_since_a_date(tmp_path: Path) -> None:
    writer = BillWriter(tmp_path / ".kora/bill", "r1")
    writer.charge("sonnet", "judge", Response("", 100, 10), PRICE, api_model="claude-x")
    writer.charge("gpt", "target", Response("", 200, 20, cache_read_tokens=50), PRICE)
    old = BillWriter(tmp_path / ".kora/bill", "r0")
    old.charge("gpt", "target", Response("", 1, 1), PRICE)
    lines = (tmp_path / ".kora/bill/r0").glob("*.jsonl")
    for f in lines:  # a day long past
        f.write_text(f.read_text().replace('"t":', '"t":1000000000.0,"old":'))
    (tmp_path / ".kora/bill/r1" / "cut.jsonl").write_bytes(b'{"t": 5, "run"')  # a kill

    def usage(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "kora.commands.main", "usage", "--json", *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        doc: dict[str, Any] = json.loads(done.stdout)
        return doc

    everything = usage()
    assert everything["billed"]["calls"] == 3
    recent = usage("--since", "2020-01-01")["billed"]
    assert (recent["calls"], recent["input_tokens"], recent["output_tokens"]) == (2, 300, 30)
    assert recent["cache_read_tokens"] == 50
    assert set(recent) == {*KINDS, "reasoning_tokens", "cost"}  # reasoning: 0 where none
    by_model = {r["name"]: r["calls"] for r in usage("--since", "2020-01-01")["byModel"]}
    assert by_model == {"sonnet (claude-x)": 1, "gpt": 1}


def test_the_command_to_go_on_is_the_one_typed_with_the_new_budget() -> None:
    from kora.run.session import go_on_command

    argv = ["/x/bin/snakemake", "--cores", "2", "results/a/results.json", "--configfile", "d.yaml"]
    assert go_on_command(argv) == "snakemake --cores 2 results/a/results.json --configfile d.yaml"
    again = go_on_command([*argv, "--config", "budget={usd: 1}"], {"budget": "{usd: 3}"})
    assert again.endswith("--configfile d.yaml --config 'budget={usd: 3}'")
    assert again.count("--config ") == 1


@pytest.mark.timeout(60)
def test_a_lock_is_stale_only_when_no_snakemake_of_the_workspace_lives(tmp_path: Path) -> None:
    from kora.run.runlock import busy
    from kora.run.workflow.snakemake_api import _is_snakemake, stale_locks

    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("x")
    store_lock = tmp_path / ".kora" / "cache.lock"
    store_lock.parent.mkdir()
    store_lock.write_text("")
    cache = tmp_path / ".kora" / "cache"
    assert stale_locks(tmp_path, lambda: busy(cache)) == [locks / "0.output.lock"]
    with store_lock.open() as held:  # a run holds the store
        fcntl.flock(held, fcntl.LOCK_EX)
        probe = subprocess.run(
            [sys.executable, "-c", "import sys; from pathlib import Path; "
             "from kora.run.runlock import busy; from kora.run.workflow.snakemake_api import stale_locks; "
             "print(len(stale_locks(Path(sys.argv[1]), lambda: busy(sys.argv[2]))))",
             str(tmp_path), str(cache)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert probe.stdout.strip() == "0", probe.stderr
    assert _is_snakemake([b"/v/bin/python3", b"/v/bin/snakemake", b"--cores"])
    assert _is_snakemake([b"python", b"-m", b"snakemake"])
    assert not _is_snakemake([b"python3", b"/w/.snakemake/scripts/tmpab.seeds.py"])


def test_a_budget_counts_from_the_first_run_that_set_one_or_from_its_day(tmp_path: Path) -> None:
    """A pilot run before any budget does not count against one set later; the runs from
    the first one with a budget on count together; `since` names the day instead."""
    import datetime as dt

    from kora.config.schema import BudgetConfig
    from kora.llm.money.budget import counting_since
    from kora.run.transport.jobspec import run_settings

    store = tmp_path / ".kora" / "cache"
    assert not (tmp_path / ".kora/budget/since.json").exists()
    counting_since(store, start=False)  # kora plan: looks, writes nothing
    assert not (tmp_path / ".kora/budget/since.json").exists()
    first = counting_since(store)
    assert counting_since(store) == first  # later runs count from the same moment
    day = BudgetConfig.model_validate({"usd": "40", "since": "2026-11-01"})  # as --config gives
    assert day.usd == 40.0 and day.since == dt.date(2026, 11, 1)
    assert counting_since(store, day.since_epoch) == day.since_epoch != first
    # a date from YAML reaches the jobs as JSON text
    budget = {"usd": 5, "since": dt.date(2026, 11, 1)}
    assert run_settings({"budget": budget})["budget"] == {"usd": 5, "since": "2026-11-01"}
