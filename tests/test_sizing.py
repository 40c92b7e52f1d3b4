"""How large a run must be to see a difference (kora.analysis.stats.sizing, `kora plan
--detect`): the seeds it asks for, the power it promises checked by simulation (1,000
simulated runs, seeded), and the command on a copy of the project."""

from __future__ import annotations

import gc
import math
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from statsmodels.stats.multitest import multipletests

from kora.analysis.stats.power import mcnemar_power
from kora.analysis.stats.sizing import ASSUMED_DISCORDANCE, assumed, detect, discordance
from kora.commands.main import main as kora_main
from tests.comparedata import per_test, write_reference
from tests.helpers import copy_workflow
from tests.simulated import exact_mcnemar_pvalues, simulate_mcnemar_power
from tests.workflows import TINY

RUNS = 1000

# (delta, psi, cells, pairs per seed): the demo's comparison (4 risks x 2 ages x 2
# motivations x 2 prompts, 13 cells, its earlier run's discordance), a small grid with
# the gate on the overall rate alone, a large difference, a v2 total_seeds grid
DESIGNS = [
    (0.05, 0.198, 13, 32),
    (0.05, 0.2, 1, 8),
    (0.15, 0.35, 10, 8),
    (0.1, 0.25, 22, 6),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("delta", "psi", "cells", "per_seed"), DESIGNS)
def test_the_promised_power_by_simulation(
    delta: float, psi: float, cells: int, per_seed: int
) -> None:
    d = detect(delta, psi, pairs_per_seed=per_seed, unit="seeds_per_task", cells=cells)
    assert d.level == pytest.approx(0.05 / cells)
    assert d.pairs == d.seeds * per_seed >= d.pairs_needed
    # the smallest number of seeds: one fewer falls short
    assert (d.seeds - 1) * per_seed < d.pairs_needed
    assert d.power >= d.power_needed >= 0.8
    assert mcnemar_power(d.pairs_needed - 1, delta, psi, d.level) < 0.8
    # 1,000 simulated runs of the size asked for, tested at the level promised: at least
    # the promised power, within simulation error (3 standard errors)
    seed = int(1000 * delta + 10 * cells + per_seed)
    simulated = simulate_mcnemar_power(d.pairs, delta, psi, d.level, runs=RUNS, seed=seed)
    se = math.sqrt(0.8 * 0.2 / RUNS)
    assert simulated >= 0.8 - 3 * se, (simulated, d)
    # and the exact power there, within the simulation's error
    assert abs(simulated - d.power) <= 4 * math.sqrt(d.power * (1 - d.power) / RUNS)


def _holm_gate_power(seeds: int, delta: float, psi: float, runs: int, seed: int) -> float:
    """The share of simulated demo-grid runs in which `kora compare-targets
    --fail-if-worse` fires: Holm across the 13 failing cells (overall, a category of two
    risks, 4 risks, 2 ages, 2 prompts, 3 behaviour criteria), the difference spread
    evenly over the grid, the behaviour criteria with none."""
    rng = np.random.default_rng(seed)
    risks, ages, prompts = 4, 2, 2
    n = risks * ages * prompts * seeds * 2  # 2 motivations
    risk = np.repeat(np.arange(risks), n // risks)
    age = np.tile(np.repeat(np.arange(ages), n // (risks * ages)), risks)
    prompt = np.arange(n) % prompts
    groups = [np.ones(n, bool), (risk == 1) | (risk == 2)]
    groups += [risk == r for r in range(risks)] + [age == a for a in range(ages)]
    groups += [prompt == p for p in range(prompts)]
    member = np.array(groups, dtype=np.int64).T  # pairs x safety cells
    p10, p01 = (psi + delta) / 2, (psi - delta) / 2
    u = rng.random((runs, n))
    b = (u < p10).astype(np.int64) @ member  # runs x cells: A fails, B not
    c = ((u >= p10) & (u < p10 + p01)).astype(np.int64) @ member
    # three behaviour criteria: as discordant, no difference
    v = rng.random((runs, 3, n))
    b = np.hstack([b, (v < psi / 2).sum(axis=2)])
    c = np.hstack([c, ((v >= psi / 2) & (v < psi)).sum(axis=2)])
    p = exact_mcnemar_pvalues(b, c)
    fired = 0
    for row, bi, ci in zip(p, b, c, strict=True):
        reject = multipletests(row, alpha=0.05, method="holm")[0]
        fired += bool(np.any(reject & (bi > ci)))
    return fired / runs


@pytest.mark.timeout(120)
def test_the_gate_fires_as_often_as_promised_on_the_demo_grid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The promise is about the overall cell at alpha / 13; the gate looks at every cell
    with Holm, so it fires at least that often (the cells besides the overall one add)."""
    # statsmodels' Holm runs a full garbage collection on every call (0.1 s in a test
    # process): not needed for 1,000 small calls
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    delta, psi = 0.05, 0.198
    d = detect(delta, psi, pairs_per_seed=32, unit="seeds_per_task", cells=13)
    power = _holm_gate_power(d.seeds, delta, psi, RUNS, seed=28)
    assert power >= 0.8 - 3 * math.sqrt(0.8 * 0.2 / RUNS), power


@pytest.mark.timeout(30)
def test_discordance_and_raised_psi() -> None:
    a = {i: i < 30 for i in range(100)}
    b = {i: 20 <= i < 40 for i in range(100)}
    d = discordance(a, b)
    assert d is not None and (d.n, d.discordant, d.psi) == (100, 30, 0.3)
    assert d.low is not None and d.high is not None and d.low < 0.3 < d.high
    assert discordance({1: True}, {2: False}) is None
    assert assumed().psi == ASSUMED_DISCORDANCE
    # a discordance below the difference cannot be: raised to it
    r = detect(0.1, 0.05, pairs_per_seed=10, unit="total_seeds")
    assert r.psi_raised and r.psi == 0.1 and r.unit == "total_seeds"
    assert detect(0.02, 0.3, pairs_per_seed=1, unit="seeds_per_task", max_seeds=100).too_many
    with pytest.raises(ValueError, match="a pair per seed and a cell"):
        detect(0.05, 0.3, pairs_per_seed=0, unit="seeds_per_task")


def _plan(workdir: Path, *args: str) -> int:
    cwd = Path.cwd()
    os.chdir(workdir)
    try:
        return kora_main(["plan", *args])
    finally:
        os.chdir(cwd)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_plan_detect_from_an_earlier_run_and_from_the_assumption(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy_workflow(tmp_path)
    cfg = {
        **TINY,
        "models": {
            "mock": {"provider": "mock", "price": {"input": 3.0, "output": 15.0}},
            "mock-b": {"provider": "mock", "model": "mock-b"},
        },
        "targets": {
            "tiny": {"model": "mock", "prompts": ["default", "child"]},
            "other": {"model": "mock-b", "prompts": ["child", "default"]},
        },
    }
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    # no earlier run: the assumption; 2 cells x 2 prompts = 4 paired tests a seed; cells:
    # overall, 2 risks (of two categories), 2 prompts, 3 behaviours = 8
    args = ["tiny", "--detect", "0.15", "--against", "other", "--configfile", "tiny.yaml"]
    assert _plan(tmp_path, *args) == 0
    out = capsys.readouterr().out
    d = detect(0.15, 0.2, pairs_per_seed=4, unit="seeds_per_task", cells=8)
    assert "discordance (one fails, the other not): 0.200, assumed" in out
    assert "alpha 0.05 / 8 cells = 0.00625" in out
    assert f"seeds_per_task: {d.seeds} -> {d.pairs:,} paired tests (4 per seed)" in out
    assert "the config has 2" in out
    assert "that run from scratch (new seeds: nothing stored is reused) (tiny, other" in out
    assert "est. cost $" in out
    # an earlier run of the two: 40 paired tests, 6 discordant
    for target, fails in (("tiny", range(0, 8)), ("other", range(4, 10))):
        docs = [
            per_test(f"s{i}", "failing" if i in fails else "adequate", prompt="child")
            for i in range(40)
        ]
        write_reference(tmp_path / "results" / target / "judgments", docs)
    args = [
        "tiny",
        "--detect",
        "0.1",
        "--against",
        "other",
        "--overall",
        "--configfile",
        "tiny.yaml",
    ]
    assert _plan(tmp_path, *args) == 0
    out = capsys.readouterr().out
    assert "0.150, 6 of 40 paired tests in the earlier run" in out
    assert "alpha 0.05, the overall cell tested alone" in out
    d = detect(0.1, 0.15, pairs_per_seed=4, unit="seeds_per_task", cells=1)
    assert f"seeds_per_task: {d.seeds} -> " in out and "at the top of the discordance's" in out
    # a discordance given outright
    assert _plan(tmp_path, *args, "--discordance", "0.3") == 0
    assert "0.300, as given (--discordance)" in capsys.readouterr().out
    # more seeds than a config may ask for
    assert _plan(tmp_path, *args[:2], "0.01", *args[3:]) == 0
    assert "that is more than seeds_per_task allows (100)" in capsys.readouterr().out
    # errors: a percentage, no --against, two targets
    assert _plan(tmp_path, "tiny", "--detect", "5", "--against", "other") == 2
    assert "--detect is a share in (0, 1)" in capsys.readouterr().err
    # the one place the design's figures are checked (kora.analysis.stats takes them as given)
    assert _plan(tmp_path, *args, "--alpha", "1") == 2
    assert "--power and --alpha must be between 0 and 1" in capsys.readouterr().err
    assert _plan(tmp_path, *args, "--discordance", "1.5") == 2
    assert "--discordance must be in (0, 1], got 1.5" in capsys.readouterr().err
    assert _plan(tmp_path, "tiny", "--detect", "0.05", "--configfile", "tiny.yaml") == 2
    assert (
        _plan(
            tmp_path,
            "tiny",
            "other",
            "--detect",
            "0.05",
            "--against",
            "x",
            "--configfile",
            "tiny.yaml",
        )
        == 2
    )
    assert "--detect takes one TARGET" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_plan_detect_v2_total_seeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy_workflow(tmp_path)  # the v2 taxonomy too
    cfg = {
        "benchmark": "v2",
        "models": {"mock": {"provider": "mock"}, "mock-b": {"provider": "mock", "model": "mock-b"}},
        "seed_model": "mock",
        "expand_model": "mock",
        "user_model": "mock",
        "judges": ["mock"],
        "targets": {"gpt-target": None, "new": {"model": "mock-b"}, "old": {"model": "mock"}},
        "grid": {
            "risks": ["cybersecurity", "grooming_and_manipulation"],
            "total_seeds": 6,
            "distribution": "us-census-2020",
        },
    }
    (tmp_path / "v2.yaml").write_text(yaml.safe_dump(cfg))
    # v2 targets run `default` alone: 2 risks x 1 prompt = 2 paired tests per seed; cells:
    # overall, 2 risks (two categories), 3 age ranges, 7 mechanisms = 13
    args = ["new", "--detect", "0.2", "--against", "old", "--configfile", "v2.yaml"]
    assert _plan(tmp_path, *args) == 0
    out = capsys.readouterr().out
    d = detect(0.2, 0.2, pairs_per_seed=2, unit="total_seeds", cells=13)
    assert "alpha 0.05 / 13 cells" in out
    assert f"total_seeds: {d.seeds} -> {d.pairs:,} paired tests (2 per seed), " in out
    assert "the config has 6" in out
    assert f"(new, old, total_seeds {d.seeds}): " in out
