"""A budget means what a person thinks it means (issue 58): a run that needs no paid call
is never refused, what a refusal suggests is the bill so far plus what the rest is
estimated to cost, and only the models the run calls need a price. On the tiny mock grid
with a price set: the mock's answers are then billed like a provider's."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kora.commands.main import main as kora_main
from kora.llm.money.bill import bill_dir, total
from tests.helpers import copy_workflow
from tests.workflows import TINY, command, snakemake

PRICE = {"input": 3.0, "output": 15.0}
REPORT = "results/tiny/report.html"


def tiny(d: Path, **more: Any) -> Path:
    copy_workflow(d)
    cfg = dict(TINY, models={"mock": {"provider": "mock", "price": PRICE}}, **more)
    cfg["targets"] = {**cfg["targets"], "gpt-target": None}  # config.yaml's, unpriced
    (d / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    return d


def set_budget(d: Path, usd: float) -> None:
    cfg = yaml.safe_load((d / "tiny.yaml").read_text())
    cfg["budget"] = {"usd": usd}
    (d / "tiny.yaml").write_text(yaml.safe_dump(cfg))


def billed(d: Path) -> float:
    return total(bill_dir(d / ".kora/cache")).cost


def plan_says(d: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    import os

    cwd = Path.cwd()
    os.chdir(d)
    try:
        assert kora_main(["plan", *args, "--configfile", "tiny.yaml"]) == 0
    finally:
        os.chdir(cwd)
    return capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_spent_budget_never_refuses_a_run_that_needs_no_paid_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: the report deleted, the plain command run again with a budget
    below what the workspace has billed. Nothing is to pay: the run makes the report."""
    d = tiny(tmp_path, budget={"usd": 100})  # the budget counts from this first run
    first = snakemake(d, REPORT)
    assert first.returncode == 0, first.stderr[-3000:]
    spent = billed(d)
    assert spent > 0
    set_budget(d, round(spent / 4, 4))
    (d / REPORT).unlink()
    out = plan_says(d, capsys, "tiny")
    assert "will stop at the budget" not in out, out
    assert "pays for no call" in out, out
    again = snakemake(d, REPORT)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "spent before the run starts" not in again.stderr
    assert (d / REPORT).exists()
    assert billed(d) == spent  # and nothing was paid


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_spent_budget_suggests_the_bill_plus_the_rest_and_that_budget_suffices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's answers gone (the call store too), its bill kept: the run needs every call
    again. It is refused before any job, and the budget it suggests is what was billed
    plus what the rest costs (not the budget doubled); that budget sees the run through."""
    d = tiny(tmp_path, budget={"usd": 100})
    first = snakemake(d, "results/tiny/results.json")
    assert first.returncode == 0, first.stderr[-3000:]
    spent = billed(d)  # what the whole run costs, and what is billed now
    for gone in ("results", "data/seeds", "data/scenarios", ".kora/cache"):
        shutil.rmtree(d / gone)
    set_budget(d, round(spent / 4, 4))
    out = plan_says(d, capsys, "tiny")
    plan_said = re.search(r"budget=\{usd: ([\d.]+)\}", out)
    assert plan_said is not None, out
    refused = snakemake(d, "results/tiny/results.json")
    assert refused.returncode != 0
    assert "the budget is spent before the run starts" in refused.stderr, refused.stderr[-3000:]
    assert billed(d) == spent  # refused before any call
    said = re.search(r"raise it: (snakemake .*)$", refused.stderr, re.M)
    assert said is not None, refused.stderr[-3000:]
    suggested = float(re.search(r"budget=\{usd: ([\d.]+)\}", said.group(1)).group(1))  # type: ignore[union-attr]
    # the bill plus the rest (the mock's answers are known to the plan exactly), rounded
    # up to two figures: not 2 x the budget (spent / 2), which would stop the run again
    assert 2 * spent <= suggested <= 2 * spent * 1.12, (spent, suggested)
    assert float(plan_said.group(1)) == suggested
    go_on = command(d, said.group(1))
    assert go_on.returncode == 0, go_on.stderr[-3000:]
    assert (d / "results/tiny/results.json").exists()
    assert billed(d) == pytest.approx(2 * spent)
    assert shlex.split(said.group(1))[0] == "snakemake"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_dollar_budget_needs_a_price_only_on_the_models_the_run_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """config.yaml's gpt-target (OpenAI, no price) stays in the config: a run of the mock
    target with a budget in dollars is not refused for it; a run of gpt-target is, before
    any job, naming the model."""
    d = tiny(tmp_path, budget={"usd": 100})
    cfg = yaml.safe_load((d / "tiny.yaml").read_text())
    cfg["targets"]["gpt-target"] = {"model": "gpt"}  # config.yaml's, back
    (d / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    check = command(d, "kora check-config tiny --configfile tiny.yaml")
    assert check.returncode == 0, check.stderr
    run = snakemake(d, "results/tiny/results.json")
    assert run.returncode == 0, run.stderr[-3000:]
    assert orjson.loads((d / "results/tiny/results.json").read_bytes())
    other = snakemake(d, "results/gpt-target/results.json")
    assert other.returncode != 0
    assert re.search(r"budget: .*gpt has none", other.stderr), other.stderr[-3000:]
    # check-config refuses it too, in the run's words
    check = command(d, "kora check-config gpt-target --configfile tiny.yaml")
    said = check.stderr.strip().partition("a run of gpt-target is refused: ")[2]
    assert check.returncode == 2 and said.startswith("budget: ") and said in other.stderr
    assert "mock" not in re.search(r"budget: .*has none.*", other.stderr).group(0)  # type: ignore[union-attr]
