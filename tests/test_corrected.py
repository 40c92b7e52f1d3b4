"""The report's corrected rates (kora.analysis.stats.corrected and .score): post-strata on
the judge's grade, merged where people graded none, the score interval against Wilson's
from statsmodels and against the score test inverted another way (scipy's optimiser),
design weights of a stratified sample, the ratio of a mechanism with a precondition; and
a small seeded run of bench/ppi_coverage.py: coverage and width beside people's grades
alone, for both designs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq, minimize
from scipy.stats import norm
from statsmodels.stats.proportion import proportion_confint

from bench.ppi_coverage import Setting, simulate
from kora.analysis.stats.corrected import corrected_rate, merge_cells
from kora.analysis.stats.ppi import ppi_mean
from kora.analysis.stats.score import stratified_score

pytestmark = pytest.mark.timeout(120)
Z = float(norm.ppf(0.975))
ROOT = Path(__file__).resolve().parent.parent


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
    # by default only a cell nobody graded merges
    cells = ["failing"] * 4 + ["adequate"] * 10 + ["exemplary"] * 5
    graded = [True] + [False] * 3 + [True] * 10 + [False] * 5
    assert merge_cells(cells, graded)[1] == ("failing", "adequate+exemplary")


def test_one_cell_is_wilsons_interval_with_its_lower_end_continuity_corrected() -> None:
    """The judge says one thing: people's share; the upper end Wilson's, the lower end
    Wilson's at half a failing grade fewer (the side towards 0 is the skewed one)."""
    cells = ["adequate"] * 200
    human = np.full(200, np.nan)
    human[:40] = [1.0] * 7 + [0.0] * 33
    r = corrected_rate(cells, np.zeros(200), human)
    assert r is not None and r.cells == ("adequate",) and r.n == 40 and r.N == 200
    assert r.estimate == pytest.approx(7 / 40)
    assert r.high == pytest.approx(wilson(7, 40)[1], abs=1e-10)
    assert r.low == pytest.approx(wilson(6.5, 40)[0], abs=1e-10)
    assert (r.humans_low, r.humans_high) == pytest.approx(wilson(7, 40), abs=1e-10)
    assert (r.judge, r.judge_low, r.judge_high) == (0.0, 0.0, pytest.approx(wilson(0, 200)[1]))
    assert r.judge_excludes  # the judge saw none failing; people saw 7 of 40
    # above 1/2 the correction moves to the upper end
    human[:40] = [1.0] * 33 + [0.0] * 7
    r = corrected_rate(cells, np.zeros(200), human)
    assert r is not None
    assert r.low == pytest.approx(wilson(33, 40)[0], abs=1e-10)
    assert r.high == pytest.approx(wilson(33.5, 40)[1], abs=1e-10)


def test_the_score_interval_of_one_share_is_wilsons() -> None:
    for k, n in ((0, 30), (1, 30), (7, 40), (30, 30), (2, 100)):
        est, low, high = stratified_score([1.0], [n], [k], 1e12, Z, corrected=False)
        assert est == k / n
        assert (low, high) == pytest.approx(wilson(k, n), abs=1e-10)


def score_interval_by_optimiser(
    share: np.ndarray, n: np.ndarray, k: np.ndarray, big_n: float
) -> tuple[float, float]:
    """The score interval worked another way: for each theta, the cells' rates of highest
    binomial likelihood with sum W p = theta by scipy's constrained optimiser, and the
    ends where (estimate - theta)^2 = z^2 V(theta), found by brentq (no correction)."""
    estimate = float(share @ (k / n))

    def rates(theta: float) -> np.ndarray:
        def nll(p: np.ndarray) -> float:
            p = np.clip(p, 1e-12, 1 - 1e-12)
            return -float(k @ np.log(p) + (n - k) @ np.log(1 - p))

        start = np.clip(k / n + (theta - estimate), 1e-6, 1 - 1e-6)
        found = minimize(
            nll, start, method="SLSQP", bounds=[(1e-12, 1 - 1e-12)] * len(n),
            constraints={"type": "eq", "fun": lambda p: float(share @ p) - theta},
            options={"ftol": 1e-14, "maxiter": 500},
        )  # fmt: skip
        return np.asarray(found.x)

    def excess(theta: float) -> float:
        p = rates(theta)
        within = float(share**2 @ (p * (1 - p) / n))
        between = float(share @ (p - theta) ** 2) / big_n
        return (estimate - theta) ** 2 - Z * Z * (within + between)

    return brentq(excess, 1e-9, estimate - 1e-9), brentq(excess, estimate + 1e-9, 1 - 1e-9)


@pytest.mark.parametrize(
    ("share", "n", "k"),
    [
        ([0.1, 0.9], [20, 60], [14, 9]),
        ([0.05, 0.6, 0.35], [15, 180, 105], [6, 3, 1]),
        ([0.3, 0.7], [4, 9], [3, 1]),
    ],
)
def test_the_score_interval_of_several_cells_by_an_optimiser(
    share: list[float], n: list[int], k: list[int]
) -> None:
    w, nn, kk = np.array(share), np.array(n, float), np.array(k, float)
    est, low, high = stratified_score(w, nn, kk, 1000.0, Z, corrected=False)
    assert est == pytest.approx(float(w @ (kk / nn)))
    assert (low, high) == pytest.approx(score_interval_by_optimiser(w, nn, kk, 1000.0), abs=2e-5)
    # the correction only moves the lower end out (a rate under 1/2)
    _, c_low, c_high = stratified_score(w, nn, kk, 1000.0, Z)
    assert c_low < low and c_high == high


def test_two_cells_post_stratified() -> None:
    """Judge failing on 100 of 1,000; people graded 20 of those (14 failing) and 60 of the
    rest (9 failing): 0.1 x 14/20 + 0.9 x 9/60, the score interval of the two cells; the
    corrected interval is narrower than people's share alone, which over-counts the
    judge's failing cell."""
    cells = ["failing"] * 100 + ["adequate"] * 900
    judge = np.array([1.0] * 100 + [0.0] * 900)
    human = np.full(1000, np.nan)
    human[:20] = [1.0] * 14 + [0.0] * 6
    human[100:160] = [1.0] * 9 + [0.0] * 51
    r = corrected_rate(cells, judge, human)
    assert r is not None and r.cells == ("failing", "adequate")
    w, n, k = np.array([0.1, 0.9]), np.array([20.0, 60.0]), np.array([14.0, 9.0])
    assert r.estimate == pytest.approx(float(w @ (k / n)), abs=1e-12)
    _, low, high = stratified_score(w, n, k, 1000, Z)
    assert (r.low, r.high) == pytest.approx((float(low), float(high)), abs=1e-12)
    assert r.humans == pytest.approx(23 / 80)
    assert (r.humans_low, r.humans_high) == pytest.approx(wilson(23, 80), abs=1e-10)
    assert (r.judge_low, r.judge_high) == pytest.approx(wilson(100, 1000), abs=1e-12)
    assert r.judge_excludes and r.high - r.low < r.humans_high - r.humans_low


def test_a_cell_nobody_graded_merges_and_none_graded_anywhere_gives_no_figure() -> None:
    cells = ["failing"] * 10 + ["adequate"] * 40
    human = np.full(50, np.nan)
    human[10:30] = [1.0] * 3 + [0.0] * 17
    judge = np.array([1.0] * 10 + [0.0] * 40)
    r = corrected_rate(cells, judge, human)
    assert r is not None and r.cells == ("failing+adequate",)
    assert r.estimate == pytest.approx(3 / 20) and r.high == pytest.approx(wilson(3, 20)[1])
    human[10:30] = np.nan
    human[10:19] = 0.0
    assert corrected_rate(cells, judge, human) is None  # 9 grades: under 10


def test_design_weights_of_a_stratified_sample() -> None:
    """A stratified sample: 20 of the judge's 100 failing graded (weight 5) and 30 of its
    900 others (weight 30). Each cell's rate is people's weighted (Hajek) share, so a cell
    whose grades all carry one weight is its plain share; a cell mixing weights counts
    each grade by its weight, with Kish's effective number of grades."""
    cells = ["failing"] * 100 + ["adequate"] * 900
    judge = np.array([1.0] * 100 + [0.0] * 900)
    human = np.full(1000, np.nan)
    human[:20] = [1.0] * 12 + [0.0] * 8
    human[100:130] = [1.0] * 3 + [0.0] * 27
    weights = np.array([5.0] * 100 + [30.0] * 900)
    r = corrected_rate(cells, judge, human, weights=weights)
    assert r is not None
    assert r.estimate == pytest.approx(0.1 * 12 / 20 + 0.9 * 3 / 30)
    plain = corrected_rate(cells, judge, human)  # the same cells, the same estimate
    assert plain is not None and (plain.estimate, plain.low) == (r.estimate, r.low)
    # people's share alone, weighted: the design over-sampled the judge's failing ones
    hajek = (5 * 12 + 30 * 3) / (5 * 20 + 30 * 30)
    kish = (5 * 20 + 30 * 30) ** 2 / (25 * 20 + 900 * 30)
    assert r.humans == pytest.approx(hajek)
    assert (r.humans_low, r.humans_high) == pytest.approx(wilson(hajek * kish, kish), abs=1e-9)
    # a judge that now grades otherwise: one cell mixing both strata's grades
    one = corrected_rate(["adequate"] * 1000, np.zeros(1000), human, weights=weights)
    assert one is not None and one.estimate == pytest.approx(hajek)
    assert one.high == pytest.approx(wilson(hajek * kish, kish)[1], abs=1e-9)


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
    assert r.judge == pytest.approx(judge_fails.sum() / seen.sum())
    ones = np.where(graded, 1.0, np.nan)
    same = corrected_rate(cells.tolist(), judge_fails.astype(float), y, ones)
    assert same is not None and same.estimate == pytest.approx(float(w @ ybar), abs=1e-12)
    none = corrected_rate(cells.tolist(), judge_fails.astype(float), y * 0, t * 0)
    assert none is None


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="items"):
        corrected_rate(["adequate"] * 3, np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="triggered"):
        corrected_rate(["adequate"] * 20, np.zeros(20), np.zeros(20), np.full(20, np.nan))
    with pytest.raises(ValueError, match="weights"):
        corrected_rate(["adequate"] * 20, np.zeros(20), np.zeros(20), weights=np.zeros(20))
    with pytest.raises(ValueError, match="graded"):
        stratified_score([0.5, 0.5], [3, 0], [1, 0], 100, Z)


# a small version of bench/ppi_coverage.py --all: 300 runs a setting, seeded, so every
# figure is the same on every machine; at a true coverage of 0.95 the share of 300 runs
# is 0.95 +- 0.013, so 0.92 is a failure, not chance
SMALL = [
    Setting(12_000, 300, 0.05, 0.3, 0.03),
    Setting(3000, 100, 0.20, 0.5, 0.01),
    Setting(400, 40, 0.02, 0.5, 0.01),
    Setting(150, 30, 0.20, 0.5, 0.01),
]


@pytest.mark.parametrize("setting", SMALL, ids=lambda s: f"{s.conversations}-{s.rate}")
def test_coverage_and_width_beside_peoples_grades_alone(setting: Setting) -> None:
    widths = {}
    for design in ("uniform", "stratified"):
        s = Setting(**{**setting.__dict__, "design": design})
        rows = simulate(s, 300, seed=7)
        overall = rows["overall"]
        assert overall.runs == 300
        assert overall.coverage >= 0.92, (design, overall)
        # narrower than people's alone (the judge is right about most conversations),
        # by 10 % and more with 100 grades and more
        assert overall.width < overall.width_alone, (design, overall)
        if setting.grades >= 100:
            assert overall.width < 0.9 * overall.width_alone, (design, overall)
        if rows["one risk"].runs >= 30:
            assert rows["one risk"].coverage >= 0.92, rows["one risk"]
        widths[design] = overall.width
    # drawing more of the judge's failing conversations narrows it further (12,000: the
    # judge's failing stratum holds hundreds; at 400 conversations and a rate of 0.02 it
    # starts uniform, and the two are the same)
    if setting.conversations == 12_000:
        assert widths["stratified"] < 0.95 * widths["uniform"]


def test_plain_ppi_plus_plus_is_what_the_score_interval_replaced() -> None:
    """At a few failing grades PPI++'s normal interval (kora.analysis.stats.ppi, tuned
    lambda) misses the true rate far more often than 5 %: 1,000 conversations, 60 graded,
    a rate of 0.05, the judge missing 30 % and flagging 3 % - the corrected interval of
    the same runs holds it."""
    rng = np.random.default_rng(3)
    plain = corrected = 0
    for _ in range(300):
        truth = (rng.random(1000) < 0.05).astype(float)
        judge = np.where(truth == 1, rng.random(1000) >= 0.3, rng.random(1000) < 0.03)
        human = np.full(1000, np.nan)
        pick = rng.choice(1000, 60, replace=False)
        human[pick] = truth[pick]
        p = ppi_mean(judge.astype(float), human)
        plain += p.low <= 0.05 <= p.high
        cells = np.where(judge, "failing", "adequate").tolist()
        c = corrected_rate(cells, judge.astype(float), human)
        assert c is not None
        corrected += c.low <= 0.05 <= c.high
    assert plain < 0.92 * 300 and corrected >= 0.95 * 300


def test_the_words_say_what_the_code_does() -> None:
    """The method as the docs and the report name it is the one computed: no claim of a
    tuned lambda for the report's rates, nor of a sample drawn by stratum where it is
    uniform (issue 37, point 7)."""
    from kora.analysis.report import corrected as report
    from kora.analysis.stats import corrected, ppi

    assert report.METHOD is corrected.METHOD and "score interval" in corrected.METHOD
    assert "kora annotate` samples a fixed number" not in (ppi.__doc__ or "")
    doc = (ROOT / "docs/people-and-judges.md").read_text()
    method = doc[doc.index("**Method.**") :]
    method = method[: method.index("\n## ")]
    assert "score interval" in method and "power tuning" not in method.split("PPI++")[0]
