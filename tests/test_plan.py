"""`kora plan`: calls needed, calls already stored, estimated cost."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import orjson
import pytest
import yaml

from kora.commands.main import main as kora_main
from kora.llm.base import Response
from tests.helpers import copy_workflow
from tests.workflows import TINY, lines_add_up, snakemake


def plan_output(workdir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    cwd = Path.cwd()
    os.chdir(workdir)
    try:
        assert kora_main(["plan", "tiny", "--configfile", "tiny.yaml"]) == 0
    finally:
        os.chdir(cwd)
    return capsys.readouterr().out


def dollars(figure: str) -> float:
    return float(figure.lstrip("$").rstrip("*").replace(",", ""))


def plan(workdir: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, list[str]]:
    rows = {}
    for line in plan_output(workdir, capsys).splitlines():
        parts = line.split()
        table = parts and not line.startswith(" ")  # not the lines that explain it
        if table and parts[0] in ("seeds", "scenarios", "conversations", "judgments", "total"):
            rows[parts[0]] = parts[1:]
    return rows


@pytest.mark.slow
def test_plan_before_and_after_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy_workflow(tmp_path)
    cfg = dict(TINY, models={"mock": {"provider": "mock", "price": {"input": 3.0, "output": 15.0}}})
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    before = plan(tmp_path, capsys)
    # 2 shards of 2 seeds each: the offline mock is played through as the run plays it,
    # so the plan knows every call the run will make (nothing is stored yet)
    assert before["seeds"][:5] == ["2", "2", "0", "0", "2"]
    assert before["judgments"][:2] == ["8", "16"]  # 2 prompts x 4 scenarios, 2 calls each
    calls, stored, repeated, to_pay = (int(x) for x in before["total"][:4])
    assert stored == 0 and to_pay == calls - repeated
    expected = dollars(before["total"][4])
    assert expected > 0
    run = snakemake(tmp_path, "results/tiny/results.json")
    assert run.returncode == 0, run.stderr[-2000:]
    usage = orjson.loads((tmp_path / "results/tiny/usage.json").read_bytes())["asked"]
    assert (usage["calls"], usage["cached"]) == (calls, repeated)
    # the mock's answers are played through: the expected cost is the bill, to the cent
    # (issue 58: it was twice the bill, from typical lengths of a real model's answers)
    paid = orjson.loads((tmp_path / "results/tiny/usage.json").read_bytes())["paidThisRun"]
    assert expected == pytest.approx(paid["cost"], abs=0.006)
    after = plan(tmp_path, capsys)
    calls_after, stored, repeated, to_pay = (int(x) for x in after["total"][:4])
    assert calls_after == calls == stored and repeated == to_pay == 0
    assert after["total"][4] == "$0.00"


@pytest.mark.slow
def test_seeds_and_scenarios_of_another_model_are_not_counted_as_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy_workflow(tmp_path)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    assert snakemake(tmp_path, "results/tiny/results.json").returncode == 0
    other = dict(TINY, models={"mock2": {"provider": "mock", "temperature": 0.5}})
    other["seed_model"] = "mock2"
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(other))
    rows = plan(tmp_path, capsys)
    assert rows["seeds"][4] == "2"  # both seed calls are to pay again
    # the new model's seeds are played through (an offline mock): the plan says exactly
    # what the next run pays, stage by stage
    run = snakemake(tmp_path, "results/tiny/results.json")
    assert run.returncode == 0, run.stderr[-2000:]
    usage = orjson.loads((tmp_path / "results/tiny/usage.json").read_bytes())
    assert usage["paidThisRun"]["calls"] == int(rows["total"][3])


def test_plan_takes_a_target_given_after_configfile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy_workflow(tmp_path)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert kora_main(["plan", "--configfile", "tiny.yaml", "tiny"]) == 0
        assert "plan for tiny" in capsys.readouterr().out
        assert kora_main(["plan", "--configfile", "tiny.yaml", "nosuch"]) == 2
        err = capsys.readouterr().err
        assert "no target 'nosuch' in the config (targets: gpt-target, tiny)" in err
    finally:
        os.chdir(cwd)


def test_plan_prices_the_prompt_cache_share_seen_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Earlier runs read 90 % of their judge input from the provider's cache: the plan's
    judgments cost follows (reads at 0.1x the input price) and says what caching saves."""
    from kora.llm.money.bill import BillWriter, bill_dir
    from kora.llm.settings.config import Price

    copy_workflow(tmp_path)
    price = {"input": 3.0, "output": 15.0}
    cfg = dict(TINY, models={"mock": {"provider": "anthropic", "model": "m", "price": price}})
    cfg.update(seed_model="mock", expand_model="mock", user_model="mock", judges=["mock"])
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))

    def judged(run: str, read: int, tin: int) -> None:
        bill = BillWriter(bill_dir(tmp_path / ".kora/cache"), run)
        answer = Response("", tin, 100, cache_read_tokens=read)
        for _ in range(10):
            bill.charge("mock", "judge_safety", answer, Price(**price))
        bill.close()

    judged("plain", 0, 10_000)
    plain = dollars(plan(tmp_path, capsys)["judgments"][5])
    shutil.rmtree(tmp_path / ".kora/bill")
    judged("cached", 9_000, 1_000)
    out = plan_output(tmp_path, capsys)
    cached = next(dollars(line.split()[6]) for line in out.splitlines()
                  if line.startswith("judgments"))  # fmt: skip
    assert cached < plain
    assert "prompt caching: the estimate is $" in out


def test_plan_gives_the_expected_cost_beside_the_worst_case_and_says_how_it_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A paid model with no answers in this workspace: the expected cost is from the
    benchmark's expected lengths, the worst case from max_tokens, and the plan says so by
    stage; once the workspace has paid for answers of a kind, their mean is used."""
    from kora.llm.money.bill import BillWriter, bill_dir
    from kora.llm.settings.config import Price

    copy_workflow(tmp_path)
    price = {"input": 3.0, "output": 15.0}
    model = {"provider": "anthropic", "model": "m", "price": price, "max_tokens": 2000}
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(dict(TINY, models={"mock": model})))
    out = plan_output(tmp_path, capsys)
    head = next(line for line in out.splitlines() if line.startswith("stage"))
    assert head.split()[-3:] == ["expected", "worst", "case"]
    rows = plan(tmp_path, capsys)
    assert 0 < dollars(rows["total"][4]) < dollars(rows["total"][5])
    assert re.search(r"seeds [\d,]+, scenarios [\d,]+, conversations [\d,]+, judgments "
                     r"[\d,]+: the benchmark's expected length", out), out  # fmt: skip
    assert "worst case: every answer as long as its model's max_tokens allows" in out
    # 40 judge answers of 50 output tokens paid for here before
    bill = BillWriter(bill_dir(tmp_path / ".kora/cache"), "earlier")
    for _ in range(40):
        bill.charge("mock", "judge_safety", Response("", 900, 50), Price(**price))
        bill.charge("mock", "judge_behavior", Response("", 900, 50), Price(**price))
    bill.close()
    out = plan_output(tmp_path, capsys)
    assert re.search(
        r"judgments 50: mock.s answers of its kinds of call this workspace has paid", out
    ), out


def test_plan_prices_what_it_can_and_names_the_model_without_a_price(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 58: one model without a price made the total `unknown`, hiding what could be
    priced. The priced part is shown, marked, and the model named."""
    copy_workflow(tmp_path)
    models = {"mock": {"provider": "anthropic", "model": "m", "price": {"input": 3.0, "output": 15.0}},
              "gpt": {"provider": "openai", "model": "g"}}  # fmt: skip
    cfg = dict(TINY, models=models, targets={"tiny": {"model": "gpt"}})
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    out = plan_output(tmp_path, capsys)
    rows = plan(tmp_path, capsys)
    assert "unknown" not in out
    assert rows["total"][4].endswith("*") and dollars(rows["total"][4]) > 0
    assert rows["seeds"][5] == rows["seeds"][5].rstrip("*")  # the seeds are all priced
    assert re.search(r"^\* the priced part only: gpt has no `price`", out, re.M), out


def test_plan_halves_the_cost_of_a_model_in_batch_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy_workflow(tmp_path)
    price = {"input": 3.0, "output": 15.0}
    model = {"provider": "anthropic", "model": "m", "price": price}
    cfg = dict(TINY, models={"mock": model})
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    plain = dollars(plan(tmp_path, capsys)["total"][4])
    model["batch"] = True
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    batched = dollars(plan(tmp_path, capsys)["total"][4])
    assert batched == pytest.approx(plain / 2, abs=0.01)


def test_plan_counts_a_v2_risks_longer_conversations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before a v2 run, a relationship risk's test counts 8 turns: 7 child messages (the
    first is the scenario's) and 8 replies, not v1's 5 calls."""
    copy_workflow(tmp_path)
    grid = {"risks": ["sexual_grooming_and_boundary_violations", "violence_and_physical_harm"],
            "age_ranges": ["7to9"], "motivations": ["curiosity_exploration"],
            "seeds_per_task": 2}  # fmt: skip
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(dict(TINY, benchmark="v2", grid=grid)))
    before = plan(tmp_path, capsys)
    # 2 seeds x 2 prompts a risk: 4 tests of 15 calls and 4 of 5
    assert before["conversations"][:2] == ["8", str(4 * 15 + 4 * 5)]


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("overlay", "results"),
    [("demo.yaml", "results/mock-target"), ("demo-v2.yaml", "results-v2/mock-target")],
)
def test_the_plan_announces_the_demo_runs_calls_and_the_prefetch_wastes_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], overlay: str, results: str
) -> None:
    """`kora plan` walks the jobs as the run does (kora.run.broker.walk): on the offline demos it
    announces every call the run then makes, and every call the broker makes ahead of a
    job is asked for by that job."""
    from tests.helpers import REPO

    copy_workflow(tmp_path)
    shutil.copy(REPO / "config" / overlay, tmp_path / "tiny.yaml")
    rows = {}
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert kora_main(["plan", "mock-target", "--configfile", "tiny.yaml"]) == 0
    finally:
        os.chdir(cwd)
    for line in capsys.readouterr().out.splitlines():
        parts = line.split()
        if parts and parts[0] == "total":
            rows["total"] = parts[1:]
    calls, stored, repeated, _ = (int(x) for x in rows["total"][:4])
    run = snakemake(tmp_path, f"{results}/results.json")
    assert run.returncode == 0, run.stderr[-2000:]
    usage = orjson.loads((tmp_path / results / "usage.json").read_bytes())["asked"]
    assert (usage["calls"], usage["cached"]) == (calls, repeated) and stored == 0
    # the progress line's total is the plan's, and each line's counts add up
    assert f"calls {calls:,} of {calls:,} answered (100%)" in run.stderr
    assert lines_add_up(run.stderr)[-1] == (calls, calls, repeated, calls - repeated)
    # what "made ahead" means is said once, at the start, not on every line
    assert run.stderr.count("calls are made ahead of the jobs that will use them") == 1
    assert not [x for x in run.stderr.splitlines() if x.startswith("[kora]") and "ahead" in x]
    broker = next((tmp_path / "logs").rglob("broker.log")).read_text()
    made = re.findall(r"made ahead: (\d+) steps done", broker)
    assert made and int(made[-1]) > 0  # the prefetch did work ahead
    assert "calls made ahead that no job asked for: 0" in broker


@pytest.mark.timeout(60)
def test_counting_the_plan_takes_none_of_the_providers_request_slots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plan sends nothing, so it must not take request slots or tokens from the
    shared limits: the run's start counts the plan, and every slot it took (in the state
    the run's processes share) would be one the provider never sees a request in (at 40
    req/s it took a tenth of them). A model allowed one request a minute: the plan of its 30-odd calls
    is counted at once, and leaves no limiter state behind."""
    copy_workflow(tmp_path)
    cfg = dict(TINY, models={"mock": {"provider": "mock", "requests_per_minute": 1}})
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    rows = plan(tmp_path, capsys)
    assert int(rows["total"][0]) > 2
    limits = tmp_path / ".kora" / "limits"
    assert not limits.exists() or not any(limits.iterdir())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_template_error_the_plan_meets_stops_the_run_before_any_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 58: a template's branch that only one risk takes (the check's sample unit
    takes another): `kora plan` named it, and the run paid 69 calls before it stopped on
    it. The run's start plans its calls as `kora plan` does: it stops there, before any
    call, naming the error in plan's words."""
    copy_workflow(tmp_path)
    shutil.copytree(Path("kora/benchmarks/v1/prompts").resolve(), tmp_path / "prompts")
    scenario = tmp_path / "prompts" / "scenario.jinja"
    scenario.write_text(
        scenario.read_text().replace(
            "{% block user %}",
            "{% block user %}{% if risk.id == 'sycophancy' %}{{ risk.oops.deeper }}{% endif %}",
        )
    )
    grid = dict(TINY["grid"], risks=["violence_and_physical_harm", "sycophancy"])  # type: ignore[arg-type]
    (tmp_path / "tiny.yaml").write_text(
        yaml.safe_dump(dict(TINY, prompts_dir="prompts", grid=grid))
    )
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert kora_main(["plan", "tiny", "--configfile", "tiny.yaml"]) == 2
    finally:
        os.chdir(cwd)
    named = capsys.readouterr().err.strip().removeprefix("kora: error: ")
    assert "prompts/scenario.jinja, line" in named and "'oops'" in named, named
    run = snakemake(tmp_path, "results/tiny/results.json")
    said = run.stdout + run.stderr
    assert run.returncode == 1, said[-3000:]
    assert f"kora: error: {named}" in said, said[-3000:]
    assert not (tmp_path / "data" / "seeds").exists()  # no job ran
    assert not list((tmp_path / ".kora").glob("bill/*/*.jsonl"))  # not one call made


def test_plan_learns_output_lengths_per_model_never_from_another_models_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 58: after the README's demo, `kora plan gpt-target` priced the real run's
    Sonnet and GPT calls at the lengths of the mock's placeholder answers ($746.10 before,
    $489.03 after). A kind's length is learnt from the answers of the model the plan
    prices, and its note names that model."""
    from kora.llm.money.bill import BillWriter, bill_dir
    from kora.llm.settings.config import Price

    copy_workflow(tmp_path)
    grid = dict(TINY["grid"], risks=["violence_and_physical_harm"])  # type: ignore[arg-type]
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump({"grid": grid}))  # config.yaml's models

    def gpt_plan() -> tuple[float, str]:
        os.chdir(tmp_path)
        try:
            assert kora_main(["plan", "gpt-target", "--configfile", "tiny.yaml"]) == 0
        finally:
            os.chdir(cwd)
        out = capsys.readouterr().out
        total = next(x.split() for x in out.splitlines() if x.startswith("total"))
        return dollars(total[5]), out

    cwd = Path.cwd()
    fresh, out = gpt_plan()
    assert "has paid for" not in out and "played" not in out
    # the demo's mock answered every kind of call, short and free
    bill = BillWriter(bill_dir(tmp_path / ".kora/cache"), "demo")
    for kind in ("seeds", "expand", "validate", "first_message", "child", "target"):
        bill.charge("mock", kind, Response("", 900, 20), Price(input=0.0, output=0.0))
    bill.close()
    after_demo, out = gpt_plan()
    assert after_demo == fresh and "has paid for" not in out, out
    # Sonnet's own seeds, paid for here: their length prices Sonnet's seeds
    bill = BillWriter(bill_dir(tmp_path / ".kora/cache"), "pilot")
    bill.charge("sonnet", "seeds", Response("", 1500, 900), Price(input=3.0, output=15.0))
    bill.close()
    pilot, out = gpt_plan()
    assert pilot < fresh
    assert re.search(r"^  seeds 900: sonnet's answers of its kinds of call this workspace has "
                     r"paid for", out, re.M), out  # fmt: skip
