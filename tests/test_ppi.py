"""Prediction-powered rates (kora.analysis.stats.ppi): the numbers of the reference package
`ppi_py` and the paper's formulas worked by hand, the stratified estimator, bad input,
per-group figures, and the interval's coverage in a small seeded simulation."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy.stats import norm

from kora.analysis.stats.ppi import UnsampledStratum, excludes, ppi_mean
from kora.analysis.stats.rates import wilson

pytestmark = pytest.mark.timeout(60)

Z = float(norm.ppf(0.975))
Data = tuple[np.ndarray, np.ndarray]


def uniforms(count: int, multiplier: int, offset: int) -> np.ndarray:
    """Spread values in [0, 1) without a random generator (whose streams may change)."""
    i = np.arange(count, dtype=np.uint64) + np.uint64(offset)
    return ((i * np.uint64(multiplier)) % np.uint64(2**32)).astype(float) / 2**32


def labelled(truth: np.ndarray, n: int, offset: int) -> np.ndarray:
    order = np.argsort(uniforms(truth.size, 3266489917, offset), kind="stable")
    human = np.full(truth.size, np.nan)
    human[order[:n]] = truth[order[:n]]
    return human


def binary_judge() -> Data:
    """1,000 conversations, 12 % failing; the judge misses 30 %, flags 3 % of the rest."""
    truth = (uniforms(1000, 2654435761, 1) < 0.12).astype(float)
    u = uniforms(1000, 2246822519, 7)
    judge = np.where(truth == 1, u >= 0.3, u < 0.03).astype(float)
    return judge, labelled(truth, 120, 3)


def probability_judge() -> Data:
    """800 conversations, 20 % failing; the judge gives a probability."""
    truth = (uniforms(800, 2654435761, 11) < 0.2).astype(float)
    judge = np.clip(0.15 + 0.6 * truth + 0.3 * (uniforms(800, 2246822519, 5) - 0.5), 0, 1)
    return judge, labelled(truth, 90, 9)


DATASETS: dict[str, Callable[[], Data]] = {"binary": binary_judge, "probability": probability_judge}

# ppi-python 0.2.3 on the data sets above (alpha 0.05), computed once in a separate
# environment: at a fixed lam, ppi_mean_pointestimate, ppi_mean_ci (low, high), and the
# two parts of that interval's half-width each alone (the rectifier's: the unlabelled
# predictions replaced by a constant; the imputed part's: the labels replaced by lam x
# the predictions); the tuned lam (ppi_mean_pointestimate with lam=None, read back
# through the estimate); classical_mean_ci.
PPI_PY_FIXED: dict[tuple[str, float], tuple[float, float, float, float, float]] = {
    ("binary", 1.0): (0.1375, 0.08971699515698196, 0.18528300484301807, 0.04298102159780237, 0.020876957015741916),
    ("binary", 0.5): (0.13541666666666666, 0.08949101077159695, 0.18134232256173638, 0.04472364068178114, 0.010438478507870958),
    ("probability", 1.0): (0.2116241059530998, 0.1693956438062683, 0.2538525680999313, 0.03772666764288962, 0.018972125970732112),
    ("probability", 0.5): (0.20581205297654992, 0.1461730990967347, 0.26545100685636513, 0.05887970303013079, 0.009486062985366056),
}  # fmt: skip
PPI_PY_LAM = {"binary": 0.6825892857142902, "probability": 0.9999999999999976}
PPI_PY_CLASSICAL = {
    "binary": (0.0725124276505352, 0.19415423901613146),
    "probability": (0.1173606623593918, 0.2826393376406082),
}


@pytest.mark.parametrize("lam", [1.0, 0.5])
@pytest.mark.parametrize("name", sorted(DATASETS))
def test_the_reference_packages_estimate_and_interval_at_a_fixed_lambda(
    name: str, lam: float
) -> None:
    f, y = DATASETS[name]()
    estimate, low, high, half_rectifier, half_imputed = PPI_PY_FIXED[name, lam]
    r = ppi_mean(f, y, lam=lam)
    assert r.estimate == pytest.approx(estimate, abs=1e-12)
    n, unlabelled = r.n_labelled, r.N - r.n_labelled
    assert (n, unlabelled) == ((120, 880) if name == "binary" else (90, 710))
    # ppi_py's variances divide by n, these by n - 1: the same parts, rescaled
    assert (low + high) / 2 == pytest.approx(estimate, abs=1e-12)
    assert half_rectifier**2 + half_imputed**2 == pytest.approx(((high - low) / 2) ** 2)
    half = math.sqrt(
        half_rectifier**2 * n / (n - 1) + half_imputed**2 * unlabelled / (unlabelled - 1)
    )
    assert r.high - r.estimate == pytest.approx(half, rel=1e-10)
    assert r.estimate - r.low == pytest.approx(half, rel=1e-10)
    assert r.se == pytest.approx(half / Z, rel=1e-10)


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_the_tuned_lambda_is_ppi_plus_plus_with_each_set_s_own_variance(name: str) -> None:
    f, y = DATASETS[name]()
    r = ppi_mean(f, y)
    known = ~np.isnan(y)
    yl, fl, fu = y[known], f[known], f[~known]
    n, unlabelled = yl.size, fu.size
    by_hand = np.cov(yl, fl)[0, 1] / (np.var(fl, ddof=1) + n / unlabelled * np.var(fu, ddof=1))
    assert r.lam == pytest.approx(min(1.0, by_hand), abs=1e-12)
    # the package pools the two variances of f and divides by n: close, not equal
    assert r.lam == pytest.approx(PPI_PY_LAM[name], abs=0.03)
    # humans only: ppi_py's normal interval, with ddof=1
    low, high = PPI_PY_CLASSICAL[name]
    assert r.classical_se == pytest.approx((high - low) / 2 / Z * math.sqrt(n / (n - 1)))


def paper_by_hand(f: np.ndarray, y: np.ndarray, lam: float) -> tuple[float, float]:
    """(estimate, standard error) by the paper's formulas, with ddof=1."""
    known = ~np.isnan(y)
    yl, fl, fu = y[known], f[known], f[~known]
    estimate = lam * fu.mean() + (yl - lam * fl).mean()
    se = math.sqrt(np.var(yl - lam * fl, ddof=1) / yl.size + lam**2 * np.var(fu, ddof=1) / fu.size)
    return estimate, se


def continuous(rng: np.random.Generator, size: int, n: int, noise: float) -> Data:
    """Labels that are shares (not 0/1), so every interval is the normal one."""
    truth = rng.beta(2, 8, size)
    judge = np.clip(truth + rng.normal(0, noise, size), 0, 1)
    human = np.full(size, np.nan)
    pick = rng.choice(size, n, replace=False)
    human[pick] = truth[pick]
    return judge, human


def test_the_paper_s_formulas_by_hand_at_fixed_and_tuned_lambda() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        f, y = continuous(rng, int(rng.integers(50, 2000)), int(rng.integers(5, 40)), 0.1)
        for lam in (0.0, 0.3, 1.0, None):
            r = ppi_mean(f, y, lam=lam, alpha=0.1)
            estimate, se = paper_by_hand(f, y, r.lam)
            assert r.estimate == pytest.approx(estimate, abs=1e-12)
            assert r.se == pytest.approx(se, rel=1e-10)
            z = norm.ppf(0.95)
            low, high = max(0.0, estimate - z * se), min(1.0, estimate + z * se)
            assert (r.low, r.high) == pytest.approx((low, high))


@pytest.mark.slow
def test_ppi_plus_plus_is_never_wider_than_humans_only() -> None:
    rng = np.random.default_rng(11)
    for i in range(300):
        size, n = int(rng.integers(30, 3000)), int(rng.integers(3, 30))
        noise = float(rng.choice([0.01, 0.1, 0.5, 2.0]))
        f, y = continuous(rng, size, n, noise)
        if i % 3 == 0:
            f = 1 - f  # a judge that has it backwards: lambda clips at 0
        strata = rng.integers(0, 3, size) if i % 2 else None
        try:
            r = ppi_mean(f, y, strata=strata)
        except UnsampledStratum:
            continue
        assert r.se <= r.classical_se + 1e-15
        if min(r.classical_low, r.low) > 0 and max(r.classical_high, r.high) < 1:
            assert r.high - r.low <= r.classical_high - r.classical_low + 1e-12
        # and lambda is the best value in [0, 1]
        for lam in np.linspace(0, 1, 11):
            assert r.se <= ppi_mean(f, y, strata=strata, lam=float(lam)).se + 1e-15


@pytest.mark.parametrize("name", sorted(DATASETS))
@pytest.mark.parametrize("lam", [None, 0.0, 0.4, 1.0])
def test_one_stratum_is_plain_ppi(name: str, lam: float | None) -> None:
    f, y = DATASETS[name]()
    assert ppi_mean(f, y, lam=lam, strata=["all"] * f.size) == ppi_mean(f, y, lam=lam)


def test_stratified_ppi_by_hand() -> None:
    rng = np.random.default_rng(5)
    f, y = continuous(rng, 1500, 0, 0.15)
    strata = rng.integers(0, 4, f.size)
    # a stratified sample: 10, 20, 30 and 40 graded in the four strata
    for h, size in enumerate((10, 20, 30, 40)):
        pick = rng.choice(np.flatnonzero(strata == h), size, replace=False)
        y[pick] = rng.beta(2, 8, size)
    lam = 0.6
    r = ppi_mean(f, y, strata=strata, lam=lam)
    share, theta, var = [], [], []
    for h in range(4):
        m = strata == h
        estimate, se = paper_by_hand(f[m], y[m], lam)
        share.append(m.sum() / f.size)
        theta.append(estimate)
        var.append(se**2)
    w, t = np.array(share), np.array(theta)
    total = w @ t
    variance = (w**2) @ np.array(var) + w @ (t - total) ** 2 / f.size
    assert r.estimate == pytest.approx(total, abs=1e-12)
    assert r.se == pytest.approx(math.sqrt(variance), rel=1e-10)
    assert (r.low, r.high) == pytest.approx((total - Z * r.se, total + Z * r.se))


def test_strata_of_the_judges_grade_are_the_stratified_humans_only_estimate() -> None:
    """The judge constant within each stratum: lambda is idle, the estimate is
    sum_h W_h mean_h, and each stratum brings its Wilson interval (MOVER)."""
    judge = np.array([0.0] * 900 + [1.0] * 100)
    human = np.full(1000, np.nan)
    human[:40] = [1.0] * 2 + [0.0] * 38  # 2 of 40 graded judge-pass items fail
    human[900:940] = [1.0] * 30 + [0.0] * 10  # 30 of 40 judge-failing items fail
    r = ppi_mean(judge, human, strata=judge)
    w, p, n = np.array([0.9, 0.1]), np.array([2 / 40, 30 / 40]), np.array([40, 40])
    assert r.lam == 0.0
    assert r.estimate == r.classical == pytest.approx(w @ p)
    between = w @ (p - w @ p) ** 2 / 1000
    assert r.se == pytest.approx(math.sqrt((w**2) @ (p * (1 - p) / (n - 1)) + between))
    sides = [wilson(k, 40) for k in (2, 30)]
    down = math.sqrt(sum((wh * (ph - lo)) ** 2 for wh, ph, (lo, _) in zip(w, p, sides, strict=True)) + Z**2 * between)  # fmt: skip
    up = math.sqrt(sum((wh * (hi - ph)) ** 2 for wh, ph, (_, hi) in zip(w, p, sides, strict=True)) + Z**2 * between)  # fmt: skip
    assert (r.low, r.high) == pytest.approx((w @ p - down, w @ p + up))
    assert r.high - r.estimate > r.estimate - r.low  # Wilson's skew at 2 failing of 40


def test_humans_only_with_0_1_grades_is_the_wilson_interval() -> None:
    f, y = binary_judge()
    r = ppi_mean(f, y, lam=0.0)
    known = ~np.isnan(y)
    assert r.ci == r.classical_ci == pytest.approx(wilson(int(y[known].sum()), int(known.sum())))


def test_a_stratum_graded_once_or_in_full() -> None:
    f = np.array([0.2, 0.4, 0.6, 0.1, 0.3, 0.5, 0.7, 0.9])
    y = np.array([0.5, np.nan, np.nan, 0.2, 0.3, 0.4, np.nan, np.nan])
    strata = ["once"] * 3 + ["census"] * 3 + ["rest"] * 2
    with pytest.raises(UnsampledStratum, match=r"^strata: .*'rest'"):
        ppi_mean(f, y, strata=strata)
    y[6] = 0.6
    r = ppi_mean(f[:7], y[:7], strata=strata[:7], lam=1.0)
    # a lone 0/1-free label: variance 1/4; in full: its humans-only variance; one label
    # of one item: none. lambda acts nowhere (no stratum has 2 graded and 2 ungraded)
    w = np.array([3, 3, 1]) / 7
    p = np.array([0.5, 0.3, 0.6])
    variance = w[0] ** 2 * 0.25 + w[1] ** 2 * 0.01 / 3 + w[2] ** 2 * 0.25
    variance += w @ (p - w @ p) ** 2 / 7
    assert r.estimate == pytest.approx(w @ p)
    assert r.se == pytest.approx(math.sqrt(variance))


def test_the_judge_only_figure_is_wilson_on_all_items() -> None:
    f, y = binary_judge()
    r = ppi_mean(f, y)
    assert r.naive == f.mean()
    assert r.naive_ci == pytest.approx(wilson(int(f.sum()), f.size))


def test_everything_graded_is_humans_only() -> None:
    f, y = binary_judge()
    truth = np.where(np.isnan(y), f, y)
    r = ppi_mean(f, truth)
    assert r.lam == 0.0 and r.estimate == r.classical == truth.mean()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"human": [np.nan] * 4}, r"^human: no item graded"),
        ({"human": [1.0, np.nan, 0.0]}, r"^human: 3 values for 4 predictions"),
        ({"predictions": [0.0, 1.0, np.nan, 1.0]}, r"^predictions: NaN at item 2"),
        ({"predictions": [0.0, 2.0, 1.0, 1.0]}, r"^predictions: values must be in \[0, 1\]"),
        ({"human": [1.0, -1.0, np.nan, np.nan]}, r"^human: values must be in \[0, 1\]"),
        ({"predictions": [[0.0, 1.0], [1.0, 0.0]]}, r"^predictions: one value per item"),
        ({"predictions": []}, r"^predictions: no items"),
        ({"strata": ["a", "b"]}, r"^strata: 2 keys for 4 predictions"),
        ({"alpha": 0.0}, r"^alpha: must be in \(0, 1\)"),
        ({"lam": math.nan}, r"^lam: must be a finite number"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {
        "predictions": [0.0, 1.0, 0.0, 1.0],
        "human": [1.0, 1.0, np.nan, 0.0],
    }
    with pytest.raises(ValueError, match=message):
        ppi_mean(**(args | kwargs))  # type: ignore[arg-type]


def test_excludes() -> None:
    assert excludes((0.10, 0.12), 0.13)
    assert excludes((0.10, 0.12), 0.09)
    assert not excludes((0.10, 0.12), 0.11)
    assert not excludes((0.10, 0.12), 0.12)  # the ends belong to the interval


def test_coverage_in_a_small_simulation() -> None:
    """200 runs of 3,000 conversations (12 % failing; the judge misses 30 %, flags 3 % of
    the rest), 200 graded uniformly, seeded: PPI++'s 95 % interval holds the true rate in
    at least 90 % of runs (at 95 % the misses are binomial(200, 0.05): 10 +- 3), and the
    tuned lambda narrows people's interval."""
    rng = np.random.default_rng(1)
    hits, widths, alone = 0, [], []
    for _ in range(200):
        truth = (rng.random(3000) < 0.12).astype(float)
        u = rng.random(3000)
        judge = np.where(truth == 1, u >= 0.3, u < 0.03).astype(float)
        human = np.full(3000, np.nan)
        pick = rng.choice(3000, 200, replace=False)
        human[pick] = truth[pick]
        r = ppi_mean(judge, human)
        hits += r.low <= 0.12 <= r.high
        widths.append(r.high - r.low)
        alone.append(r.classical_high - r.classical_low)
    assert hits >= 180
    assert np.mean(widths) < 0.85 * np.mean(alone)


def test_the_lambda_reported_is_the_one_in_effect() -> None:
    """One conversation left ungraded: lambda has nothing to act on (the unlabelled mean
    needs two), so the estimate is people's alone, and the lambda reported says 0."""
    f, y = binary_judge()
    truth = np.where(np.isnan(y), f, y)
    y = truth.copy()
    y[0] = np.nan
    r = ppi_mean(f, y, lam=1.0)
    assert r.estimate == r.classical == pytest.approx(float(np.nanmean(y)))
    assert r.lam == 0.0
    # two left ungraded: it acts, and is reported
    y[1] = np.nan
    assert ppi_mean(f, y, lam=1.0).lam == 1.0
