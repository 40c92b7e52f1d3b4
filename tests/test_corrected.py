"""The report's corrected rates (kora.analysis.stats.corrected): post-strata on the judge's
grade, merged where people graded too few, against Wilson intervals from statsmodels and
the stratified and ratio formulas computed here another way; the coverage in a small
seeded simulation (bench/ppi_coverage.py's, as the report computes it)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm
from statsmodels.stats.proportion import proportion_confint

from bench.ppi_coverage import Scenario, simulate, simulate_mechanism
from kora.analysis.stats.corrected import corrected_rate, merge_cells
from kora.analysis.stats.ppi import ppi_mean

pytestmark = pytest.mark.timeout(60)
Z = float(norm.ppf(0.975))


def wilson(k: float, n: float) -> tuple[float, float]:
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    return float(low), float(high)


def test_cells_with_too_few_grades_merge_with_their_neighbour_in_grade_order() -> None:
    cells = ["failing"] * 3 + ["adequate"] * 10 + ["exemplary"] * 20
    graded = [True, True, False] + [True] * 6 + [False] * 4 + [True] * 9 + [False] * 11
    merged, names = merge_cells(cells, graded, minimum=5)
    assert names == ("failing+adequate", "exemplary")
    assert merged[:13] == ["failing+adequate"] * 13 and merged[13:] == ["exemplary"] * 20
    # exemplary short too: the smallest goes first, into the neighbour with fewer grades
    graded = [True, True, False] + [True] * 3 + [False] * 7 + [True] * 4 + [False] * 16
    assert merge_cells(cells, graded, minimum=5)[1] == ("failing+adequate+exemplary",)
    # a mechanism's cells: not triggered comes after exemplary
    cells = ["failing"] * 6 + ["exemplary"] * 6 + ["notTriggered"] * 3
    graded = [True] * 14 + [False]
    assert merge_cells(cells, graded, minimum=5)[1] == ("failing", "exemplary+notTriggered")
    assert merge_cells(cells, graded, minimum=2)[1] == ("failing", "exemplary", "notTriggered")
    # a cell graded throughout is known, however small: it stays
    assert merge_cells(cells, [True] * 15, minimum=5)[1] == ("failing", "exemplary", "notTriggered")


def test_one_cell_where_the_judge_says_one_thing_is_peoples_share_with_wilsons_interval() -> None:
    cells = ["adequate"] * 200
    human = np.full(200, np.nan)
    human[:40] = [1.0] * 7 + [0.0] * 33
    r = corrected_rate(cells, np.zeros(200), human)
    assert r is not None and r.cells == ("adequate",) and r.n == 40 and r.N == 200
    assert r.estimate == pytest.approx(7 / 40)
    assert (r.low, r.high) == pytest.approx(wilson(7, 40), abs=1e-12)
    assert (r.humans_low, r.humans_high) == pytest.approx(wilson(7, 40), abs=1e-12)
    assert (r.judge, r.judge_low, r.judge_high) == (0.0, 0.0, pytest.approx(wilson(0, 200)[1]))
    assert r.judge_excludes  # the judge saw none failing; people saw 7 of 40


def test_two_cells_combine_their_wilson_intervals_by_mover() -> None:
    """Judge failing on 100 of 1,000; people graded 20 of those (14 failing) and 60 of the
    rest (9 failing). Post-stratified: 0.1 x 14/20 + 0.9 x 9/60; each side of the interval
    the square root of the cells' Wilson sides squared, weighted, plus the between-cells
    term z^2/N sum W_h (p_h - p)^2 (the cells' shares are themselves sampled)."""
    cells = ["failing"] * 100 + ["adequate"] * 900
    judge = np.array([1.0] * 100 + [0.0] * 900)
    human = np.full(1000, np.nan)
    human[:20] = [1.0] * 14 + [0.0] * 6
    human[100:160] = [1.0] * 9 + [0.0] * 51
    r = corrected_rate(cells, judge, human)
    assert r is not None and r.cells == ("failing", "adequate")
    w, p = np.array([0.1, 0.9]), np.array([14 / 20, 9 / 60])
    est = float(w @ p)
    assert r.estimate == pytest.approx(est, abs=1e-12)
    sides = np.array([wilson(14, 20), wilson(9, 60)])
    between = float(w @ (p - est) ** 2) / 1000
    down = math.sqrt(float(w**2 @ (p - sides[:, 0]) ** 2) + Z * Z * between)
    up = math.sqrt(float(w**2 @ (sides[:, 1] - p) ** 2) + Z * Z * between)
    assert (r.low, r.high) == pytest.approx((est - down, est + up), abs=1e-12)
    # people's share on what they graded, 23 of 80, over-counts the judge's failing cell
    assert r.humans == pytest.approx(23 / 80)
    assert (r.humans_low, r.humans_high) == pytest.approx(wilson(23, 80), abs=1e-12)
    assert (r.judge_low, r.judge_high) == pytest.approx(wilson(100, 1000), abs=1e-12)
    assert r.judge_excludes and r.high - r.low < r.humans_high - r.humans_low


def test_cells_merged_into_one_are_peoples_share_without_the_judges_help() -> None:
    """No cell with 31 grades: one cell, people's share with Wilson's interval, where
    PPI++ (kora.analysis.stats.ppi, checked against ppi_py) would tune a lambda."""
    rng = np.random.default_rng(5)
    truth = (rng.random(600) < 0.15).astype(float)
    judge = np.where(truth == 1, rng.random(600) > 0.3, rng.random(600) < 0.05).astype(float)
    human = np.full(600, np.nan)
    graded = rng.choice(600, 30, replace=False)
    human[graded] = truth[graded]
    cells = np.where(judge == 1, "failing", "adequate").tolist()
    r = corrected_rate(cells, judge, human, min_cell=31)
    assert r is not None and r.cells == ("failing+adequate",)
    k = int(truth[graded].sum())
    assert r.estimate == pytest.approx(k / 30) and (r.low, r.high) == pytest.approx(wilson(k, 30))
    assert (r.humans_low, r.humans_high) == (r.low, r.high)
    assert ppi_mean(judge, human).lam > 0  # what PPI++ would have done


def test_too_few_grades_give_no_figure() -> None:
    human = np.full(50, np.nan)
    human[:9] = 0.0
    assert corrected_rate(["adequate"] * 50, np.zeros(50), human) is None
    human[9] = 1.0
    assert corrected_rate(["adequate"] * 50, np.zeros(50), human) is not None


def test_a_mechanisms_rate_among_the_conversations_it_applied_to() -> None:
    """A ratio of two post-stratified means, its variance by the delta method written
    as V(y) - 2R C(y, t) + R^2 V(t) per cell (numpy's covariances), its interval the
    Wilson interval at the effective sample size R(1 - R) / V (statsmodels')."""
    rng = np.random.default_rng(11)
    n_total = 800
    applies = rng.random(n_total) < 0.4
    failing = applies & (rng.random(n_total) < 0.2)
    seen = np.where(applies, rng.random(n_total) > 0.15, rng.random(n_total) < 0.05)
    judge_fails = seen & np.where(failing, rng.random(n_total) > 0.3, rng.random(n_total) < 0.05)
    cells = np.where(~seen, "notTriggered", np.where(judge_fails, "failing", "adequate"))
    graded = np.zeros(n_total, dtype=bool)
    graded[rng.choice(n_total, 150, replace=False)] = True
    y = np.where(graded, failing.astype(float), np.nan)
    t = np.where(graded, applies.astype(float), np.nan)
    r = corrected_rate(cells.tolist(), judge_fails.astype(float), y, t)
    assert r is not None and r.ratio

    names = sorted(set(r.cells))
    w = np.array([np.mean([c in m.split("+") for c in cells]) for m in names])
    parts = []
    for m in names:
        rows = graded & np.isin(cells, m.split("+"))
        parts.append((y[rows], t[rows]))
    ybar = np.array([a.mean() for a, _ in parts])
    tbar = np.array([b.mean() for _, b in parts])
    ratio = float(w @ ybar / (w @ tbar))
    assert r.estimate == pytest.approx(ratio, abs=1e-12)
    within = sum(
        wi**2 * (np.cov(a, b, ddof=1) @ [1, -ratio] @ [1, -ratio]) / a.size
        for wi, (a, b) in zip(w, parts, strict=True)
    )
    between = float(w @ (ybar - ratio * tbar) ** 2) / n_total
    variance = (within + between) / float(w @ tbar) ** 2
    n_eff = ratio * (1 - ratio) / variance
    assert (r.low, r.high) == pytest.approx(wilson(ratio * n_eff, n_eff), abs=1e-12)
    # the judge's own rate is among the conversations it found triggered
    assert r.judge == pytest.approx(judge_fails.sum() / seen.sum())
    # triggered everywhere: the ratio is the share, on the same post-strata
    ones = np.where(graded, 1.0, np.nan)
    same = corrected_rate(cells.tolist(), judge_fails.astype(float), y, ones)
    assert same is not None
    share = float(w @ ybar)
    assert same.estimate == pytest.approx(share, abs=1e-12)
    # nobody found it applied: no rate
    none = corrected_rate(cells.tolist(), judge_fails.astype(float), y * 0, t * 0)
    assert none is None


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="items"):
        corrected_rate(["adequate"] * 3, np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="triggered"):
        corrected_rate(["adequate"] * 20, np.zeros(20), np.zeros(20), np.full(20, np.nan))


def test_coverage_as_the_report_computes_it_in_a_small_simulation() -> None:
    """200 runs of 3,000 conversations, 300 graded by people, seeded (deterministic): the
    report's corrected interval holds the true rate in at least 93 % of them, the
    judge-only one (the judge misses 30 % of the failing) far less often, and it is
    narrower than the humans-only interval; the same for a mechanism's rate among the
    conversations it applied to."""
    s = Scenario(size=3000, n=300)
    row = simulate(200, s, seed=3)["as the report (post-stratified, small cells merged)"]
    assert row["corrected"] >= 0.93 and row["judge_only"] < 0.7, row
    assert row["width_corrected"] < 0.85 * row["width_humans_only"], row
    mech = simulate_mechanism(200, s, seed=4)
    assert mech["corrected"] >= 0.93 and mech["judge_only"] < 0.7, mech
    assert mech["width_corrected"] < mech["width_humans_only"], mech
