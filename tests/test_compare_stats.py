"""The statistics behind comparisons of targets, against independent values: statsmodels'
adjustments and McNemar test, published confidence intervals for a paired difference of
proportions, the power of the exact McNemar test (exact sum vs simulation), and the
bootstrap of target ranks. All deterministic (fixed seeds)."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy.stats import multinomial, norm, rankdata
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from kora.analysis.stats import power, ranks
from kora.analysis.stats.difference import (
    Method,
    newcombe_paired,
    paired_difference_ci,
    tango_paired,
)
from kora.analysis.stats.paired import adjust_pvalues, holm, sign_test
from kora.analysis.stats.power import connor_sample_size, mcnemar_power, sample_size
from kora.analysis.stats.ranks import _rank_min, bootstrap_ranks
from tests.helpers import REPO
from tests.simulated import exact_mcnemar_pvalues, simulate_mcnemar_power

# --- many tests at once -----------------------------------------------------------------


def test_adjust_pvalues_holm_and_bh_by_hand() -> None:
    ps = [0.01, 0.04, 0.03, 0.5]
    # Holm: sorted 0.01, 0.03, 0.04, 0.5 times 4, 3, 2, 1, then running maximum
    h = adjust_pvalues(ps, "holm")
    assert h.p == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert h.reject == [True, False, False, False]
    # Benjamini-Hochberg: p * m / rank, then running minimum from the largest
    # (0.5 * 4/4, 0.04 * 4/3, 0.03 * 4/2 -> min(0.06, 0.0533), 0.01 * 4/1)
    bh = adjust_pvalues(ps, "fdr_bh")
    assert bh.p == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert bh.reject == [True, False, False, False]
    assert (bh.method, bh.alpha) == ("fdr_bh", 0.05)
    # lenient alpha: BH rejects all three small ones, Holm only two
    assert adjust_pvalues(ps, "fdr_bh", alpha=0.06).reject == [True, True, True, False]
    assert adjust_pvalues(ps, "holm", alpha=0.06).reject == [True, False, False, False]
    # statsmodels decides with <=: a single p equal to alpha is rejected
    assert adjust_pvalues([0.05]).reject == [True]


def test_adjust_pvalues_are_statsmodels_own_to_the_bit() -> None:
    """The same floats and verdicts as statsmodels' multipletests, which the report no
    longer imports (issue 62: it held 164 MB of the report job): ties, zeros, ones, alpha
    on the boundary, and random families."""
    rng = np.random.default_rng(62)
    families = [
        [0.2, 0.001, 0.013, 0.04, 0.04, 1.0, 0.0],
        [0.05, 0.05, 0.025, 0.0125],
        [0.5] * 5,
        *(list(rng.uniform(0, 0.2, n)) for n in (1, 2, 3, 10, 40)),
        *(list(rng.choice([0.001, 0.01, 0.02, 0.05, 0.3], n)) for n in (6, 30)),
    ]
    for ps in families:
        for method, alpha in itertools.product(("holm", "fdr_bh"), (0.05, 0.0125, 0.2)):
            reject, adjusted, _, _ = multipletests(ps, alpha=alpha, method=method)
            got = adjust_pvalues(ps, method, alpha)  # type: ignore[arg-type]
            assert got.p == [float(x) for x in adjusted] and got.reject == list(reject)


def test_the_report_does_not_import_statsmodels() -> None:
    code = (
        "import sys; from tests.reportdata import TAXONOMY, make_judgments, results_doc;"
        "from kora.analysis.report.pages import render_report, records_of;"
        "render_report(records_of(make_judgments()), results_doc(), TAXONOMY);"
        "assert 'statsmodels' not in sys.modules and 'pandas' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=120)


@pytest.mark.slow
def test_holm_is_the_adjusted_pvalues() -> None:
    ps = [0.2, 0.001, 0.013, 0.04, 0.04, 1.0, 0.0]
    assert holm(ps) == adjust_pvalues(ps, "holm").p
    # unchanged from the former hand-written version: (m - rank) * p, running maximum, cap 1
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([0.3, 0.4]) == pytest.approx([0.6, 0.6])
    assert holm([]) == [] and adjust_pvalues([], "fdr_bh").reject == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([0.1, 1.2],), r"p-values must be in \[0, 1\], got 1.2"),
        (([-0.01],), r"p-values must be in \[0, 1\]"),
        (([float("nan")],), r"p-values must be in \[0, 1\], got nan"),
        (([0.1], "bonferroni"), "method must be 'holm' or 'fdr_bh'"),
    ],
)
def test_adjust_pvalues_rejects_bad_input(args: tuple[object, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        adjust_pvalues(*args)  # type: ignore[arg-type]


# --- exact McNemar ----------------------------------------------------------------------


def test_sign_test_agrees_with_statsmodels_exact_mcnemar() -> None:
    # statsmodels: binomial test on the discordant cells of [[both, a_only], [b_only, neither]]
    cases = [(b, c) for b in range(0, 26) for c in range(0, 26)]
    cases += [(3000, 3300), (10000, 10500), (50000, 50400), (7, 700), (1, 0)]
    for b, c in cases:
        expected = mcnemar([[5, b], [c, 9]], exact=True).pvalue
        assert sign_test(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300), (b, c)


def test_sign_test_is_scipys_binomtest_to_the_last_bit() -> None:
    """summary.json holds these p-values: the report job computes them without importing
    scipy.stats (46 MB), and they must not move by a bit from what binomtest gives."""
    import random

    from scipy.stats import binomtest

    rng = random.Random(7)
    cases = [(b, n - b) for n in range(1, 121) for b in range(n + 1) if 2 * b != n]
    cases += [(b, n - b) for n in rng.sample(range(121, 60_000), 300) for b in [rng.randint(0, n)]]
    for b, c in cases:
        assert sign_test(b, c) == min(1.0, binomtest(min(b, c), b + c, 0.5).pvalue), (b, c)


# --- a paired difference of failing rates, with its interval -----------------------------

# Published intervals, table as (both, a_only, b_only, neither), i.e. (a, b, c, d) of the
# papers with A's "success" = failing; difference (a_only - b_only) / n. The values are
# the publications' as quoted, with their sources, in the test suite of the R package
# ratesci (tests/testthat/test3.R; the papers themselves were not at hand), to the
# decimals printed; the Cavo et al. one also in R contingencytables' tests (test-ch8.R).
NEWCOMBE_PUBLISHED = [
    # Newcombe (1998) Stat Med 17:2635, worked example, method 10 (method 8: further down)
    ((20, 12, 2, 16), 0.95, 0.0562, 0.3292, 4),
    # Fagerland, Lydersen & Laake (2014) Stat Med 33:2850, Bentur et al. 2009 data
    ((1, 1, 7, 12), 0.95, -0.507, -0.026, 3),
    # Fagerland, Lydersen & Laake (2017) Statistical Analysis of Contingency Tables, ch. 8,
    # Cavo et al. 2012 data
    ((59, 6, 16, 80), 0.95, -0.1186, -0.0046, 4),
    # Tang M-L et al. (2010) example (Newcombe's method 10 reproduces it)
    ((8, 3, 1, 2), 0.95, -0.1574, 0.4136, 4),
    # Chang et al. (2024) example (it reproduces with Newcombe's correction)
    ((7, 25, 2, 68), 0.95, 0.133, 0.318, 3),
]
TANGO_PUBLISHED = [
    # Tango (1998) Stat Med 17:891, Table VII
    ((4, 9, 3, 16), 0.95, -0.027, 0.390, 3),
    # Tango (1998), Table V: a 90 % interval, one discordant pair out of 44
    ((43, 0, 1, 0), 0.90, -0.096, 0.037, 3),
    # Fagerland, Lydersen & Laake (2014), Bentur et al. 2009 data
    ((1, 1, 7, 12), 0.95, -0.517, -0.026, 3),
    # Agresti & Min (2005) Stat Med 24:729 example
    ((53, 16, 8, 9), 0.95, -0.020, 0.207, 3),
    # Tang M-L et al. (2010) example
    ((8, 3, 1, 2), 0.95, -0.1670, 0.4327, 4),
    # Chang et al. (2024) example
    ((7, 25, 2, 68), 0.95, 0.139, 0.321, 3),
]


@pytest.mark.parametrize(("table", "confidence", "low", "high", "digits"), NEWCOMBE_PUBLISHED)
def test_newcombe_paired_published(
    table: tuple[int, int, int, int], confidence: float, low: float, high: float, digits: int
) -> None:
    r = newcombe_paired(*table, confidence=confidence)
    _, a_only, b_only, _ = table
    assert r.diff == pytest.approx((a_only - b_only) / sum(table))
    assert round(r.low, digits) == pytest.approx(low)
    assert round(r.high, digits) == pytest.approx(high)
    assert paired_difference_ci(*table, confidence=confidence) == r


@pytest.mark.parametrize(("table", "confidence", "low", "high", "digits"), TANGO_PUBLISHED)
def test_tango_paired_published(
    table: tuple[int, int, int, int], confidence: float, low: float, high: float, digits: int
) -> None:
    r = tango_paired(*table, confidence=confidence)
    assert round(r.low, digits) == pytest.approx(low)
    assert round(r.high, digits) == pytest.approx(high)
    assert paired_difference_ci(*table, method="tango", confidence=confidence) == r


def test_newcombe_without_the_correction_is_method_8() -> None:
    # Newcombe (1998)'s example again: his method 8 (the plain correlation, no n/2
    # correction) gives 0.0618 to 0.3242. Rebuilt here from the Wilson limits (statsmodels)
    # to show what the correction changes: only a positive both*neither - a_only*b_only.
    both, a_only, b_only, neither = 20, 12, 2, 16
    n = 50
    la, ua = proportion_confint(both + a_only, n, method="wilson")
    lb, ub = proportion_confint(both + b_only, n, method="wilson")
    pa, pb = 32 / n, 22 / n
    phi = (both * neither - a_only * b_only) / math.sqrt(32 * 18 * 22 * 28)
    low = pa - pb - math.sqrt((pa - la) ** 2 - 2 * phi * (pa - la) * (ub - pb) + (ub - pb) ** 2)
    high = pa - pb + math.sqrt((ua - pa) ** 2 - 2 * phi * (ua - pa) * (pb - lb) + (pb - lb) ** 2)
    assert (round(low, 4), round(high, 4)) == (0.0618, 0.3242)
    corrected = newcombe_paired(both, a_only, b_only, neither)
    assert corrected.low < low and corrected.high > high  # the correction widens it
    # a negative cross product is not corrected: 36/12/2/0 has both*neither = 0 < 24, so
    # method 8 and method 10 coincide there (0.0569 to 0.3404)
    r = newcombe_paired(36, 12, 2, 0)
    assert (round(r.diff, 4), round(r.low, 4), round(r.high, 4)) == (0.2, 0.0569, 0.3404)


def test_tango_excludes_zero_exactly_when_mcnemar_chi_square_rejects() -> None:
    # at difference 0 Tango's score is (a_only - b_only) / sqrt(a_only + b_only), McNemar's
    # statistic: the interval and statsmodels' uncorrected asymptotic test agree
    for both, a_only, b_only, neither in itertools.product(
        range(0, 5), range(0, 16), range(0, 16), (0, 7)
    ):
        if a_only + b_only == 0:
            continue
        r = tango_paired(both, a_only, b_only, neither)
        p = mcnemar([[both, a_only], [b_only, neither]], exact=False, correction=False).pvalue
        assert (r.low > 0 or r.high < 0) == (p < 0.05), (both, a_only, b_only, neither)


@pytest.mark.parametrize("method", ["newcombe", "tango"])
def test_paired_difference_ci_shape(method: Method) -> None:
    # every table up to 12 pairs: the difference inside its interval, inside [-1, 1];
    # swapping A and B mirrors the interval
    for table in itertools.product(range(13), repeat=4):
        if not 0 < sum(table) <= 12:
            continue
        both, a_only, b_only, neither = table
        r = paired_difference_ci(both, a_only, b_only, neither, method=method)
        assert -1 <= r.low <= r.diff <= r.high <= 1, table
        m = paired_difference_ci(both, b_only, a_only, neither, method=method)
        assert m.low == pytest.approx(-r.high, abs=1e-9), table
        assert m.high == pytest.approx(-r.low, abs=1e-9), table
    # no discordant pair: centred on 0, narrowing with more pairs
    assert paired_difference_ci(3, 0, 0, 7, method=method).diff == 0
    wide = paired_difference_ci(3, 0, 0, 7, method=method)
    narrow = paired_difference_ci(30, 0, 0, 70, method=method)
    assert wide.low < narrow.low < 0 < narrow.high < wide.high
    # all pairs discordant one way: the difference is 1, and so is the upper limit
    assert paired_difference_ci(0, 5, 0, 0, method=method)[::2] == (1.0, 1.0)
    # a wider interval at a higher confidence
    r95 = paired_difference_ci(20, 12, 2, 16, method=method)
    r99 = paired_difference_ci(20, 12, 2, 16, method=method, confidence=0.99)
    assert r99.low < r95.low and r99.high > r95.high


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((0, 0, 0, 0), {}, "no pairs"),
        ((1, -1, 0, 0), {}, r"a_only must be a count \(an int >= 0\), got -1"),
        ((1, 2.0, 0, 0), {}, "a_only must be a count"),
        ((1, 2, True, 0), {}, "b_only must be a count"),
        ((1, 2, 3, 4), {"confidence": 95}, r"confidence must be in \(0, 1\), got 95"),
        ((1, 2, 3, 4), {"method": "wald"}, "method must be 'newcombe' or 'tango'"),
        ((0, 0, 0, 0), {"method": "tango"}, "tango_paired: no pairs"),
    ],
)
def test_paired_difference_ci_rejects_bad_input(
    args: tuple[int, int, int, int], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        paired_difference_ci(*args, **kwargs)


# --- power and sample size --------------------------------------------------------------

# (delta, psi, alpha): a 5-point difference at three discordances, for one test and for
# one of 75 cells under Bonferroni / Holm's first step
DESIGNS = [(0.05, psi, alpha) for alpha in (0.05, 0.05 / 75) for psi in (0.10, 0.20, 0.30)]
# the smallest n reaching 80 % power with the exact test, and Connor's n; the former are
# this module's own figures, pinned here (their power is checked by simulation below)
EXPECTED_N = [337, 658, 975, 716, 1460, 2189]
EXPECTED_CONNOR_N = [312, 626, 940, 718, 1438, 2159]


def normal_power(n: int, delta: float, psi: float, alpha: float) -> float:
    """The normal approximation of McNemar's power Connor's formula solves for n:
    Phi((delta sqrt(n) - z_{1-alpha/2} sqrt(psi)) / sqrt(psi - delta^2))."""
    za = norm.ppf(1 - alpha / 2)
    return float(norm.cdf((delta * math.sqrt(n) - za * math.sqrt(psi)) / math.sqrt(psi - delta**2)))


def test_connor_sample_size_by_hand_and_by_its_normal_power() -> None:
    # delta 0.05, psi 0.10, alpha 0.05, power 0.8: (1.959964 * 0.316228 + 0.841621 *
    # sqrt(0.0975) = 0.312250)^2 / 0.0025 = (0.619795 + 0.262794)^2 / 0.0025 = 311.59 -> 312
    assert connor_sample_size(0.05, 0.10) == 312
    # Connor's n is the first where the normal approximation reaches the power
    for (delta, psi, alpha), n in zip(DESIGNS, EXPECTED_CONNOR_N, strict=True):
        assert connor_sample_size(delta, psi, alpha) == n
        assert normal_power(n, delta, psi, alpha) >= 0.8 > normal_power(n - 1, delta, psi, alpha)


def test_exact_mcnemar_pvalues_are_sign_test() -> None:
    b, c = np.meshgrid(np.arange(0, 41), np.arange(0, 41))
    vectorised = exact_mcnemar_pvalues(b.ravel(), c.ravel())
    expected = [sign_test(int(x), int(y)) for x, y in zip(b.ravel(), c.ravel(), strict=True)]
    assert vectorised == pytest.approx(expected, rel=1e-9)
    assert exact_mcnemar_pvalues([10000], [10500])[0] == pytest.approx(sign_test(10000, 10500))


@pytest.mark.parametrize(
    ("n", "delta", "psi", "alpha"),
    [(12, 0.4, 0.6, 0.05), (30, 0.1, 0.3, 0.05), (30, 0.3, 0.3, 0.01), (25, 0.5, 1.0, 0.05)],
)
def test_mcnemar_power_by_enumeration(n: int, delta: float, psi: float, alpha: float) -> None:
    # every outcome (a_only, b_only, rest) of n pairs with its multinomial probability,
    # tested with sign_test itself: independent of the critical values the sum uses
    p10, p01 = (psi + delta) / 2, (psi - delta) / 2
    probs = [p10, p01, 1 - p10 - p01]
    expected = sum(
        multinomial.pmf([b, c, n - b - c], n, probs)
        for b in range(n + 1)
        for c in range(n + 1 - b)
        if sign_test(b, c) < alpha
    )
    assert mcnemar_power(n, delta, psi, alpha) == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize(
    ("design", "n", "connor_n"), list(zip(DESIGNS, EXPECTED_N, EXPECTED_CONNOR_N, strict=True))
)
def test_sample_size_meets_the_power_by_simulation(
    design: tuple[float, float, float], n: int, connor_n: int
) -> None:
    delta, psi, alpha = design
    s = sample_size(delta, psi, alpha, 0.8)
    assert (s.n, s.connor_n) == (n, connor_n)
    # the smallest such n: the exact power meets 0.8 at n and not at n - 1
    assert s.power >= 0.8 > mcnemar_power(n - 1, delta, psi, alpha)
    assert s.connor_power == pytest.approx(mcnemar_power(connor_n, delta, psi, alpha))
    # simulated studies (fixed seed: deterministic) deliver the promised power, within
    # 3 standard errors of 1,000 runs
    runs = 1000
    se = math.sqrt(0.8 * 0.2 / runs)
    assert simulate_mcnemar_power(n, delta, psi, alpha, runs=runs, seed=2024) >= 0.8 - 3 * se
    # and with 20,000 runs the simulation agrees with the exact sum both ways
    many = simulate_mcnemar_power(n, delta, psi, alpha, runs=20_000, seed=7)
    assert many == pytest.approx(s.power, abs=4 * math.sqrt(0.8 * 0.2 / 20_000))


def test_connor_falls_short_for_the_exact_test_at_alpha_005() -> None:
    # the exact test is conservative: Connor's n gives it 76-79 % power, not 80 %
    for delta, psi, alpha in DESIGNS[:3]:
        s = sample_size(delta, psi, alpha)
        assert s.connor_n < s.n and s.connor_power < 0.79
    # a small psi and delta: still found, and quickly (the sum skips negligible tails)
    s = sample_size(0.005, 0.05, 0.05 / 75)
    assert s.power >= 0.8 > mcnemar_power(s.n - 1, 0.005, 0.05, 0.05 / 75)
    # Connor's n can also be more than needed; the search then goes down
    s = sample_size(0.05, 0.10, 0.05 / 75)
    assert s.n < s.connor_n


def test_mcnemar_power_rises_with_n() -> None:
    # the claim sample_size's bisection rests on, for psi < 1
    for delta, psi, alpha in [(0.05, 0.1, 0.05), (0.2, 0.5, 0.01), (0.05, 0.05, 0.05 / 75)]:
        powers = [mcnemar_power(m, delta, psi, alpha) for m in range(0, 400)]
        assert all(b >= a - 1e-12 for a, b in itertools.pairwise(powers))
    assert mcnemar_power(0, 0.05, 0.1) == 0.0
    # all pairs discordant one way: the test rejects once 2 / 2**d < alpha (d = 6 at 0.05)
    assert mcnemar_power(5, 1.0, 1.0) == 0.0 and mcnemar_power(6, 1.0, 1.0) == 1.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: mcnemar_power(-1, 0.05, 0.1),
            r"n must be a number of pairs \(an int >= 0\), got -1",
        ),
        (lambda: mcnemar_power(10.5, 0.05, 0.1), "n must be a number of pairs"),  # type: ignore[arg-type]
    ],
)
def test_power_rejects_bad_input(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_sample_size_stops_past_the_pairs_it_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(power, "MAX_N", 10_000)
    with pytest.raises(ValueError, match="more than 10000 pairs needed"):
        sample_size(0.001, 0.5)


# --- ranks with uncertainty -------------------------------------------------------------


def scenarios(n: int, failing: set[int]) -> dict[str, bool]:
    return {f"s{i:03d}": i in failing for i in range(n)}


def test_bootstrap_ranks_clear_order() -> None:
    # 200 shared scenarios; failing rates 5 %, 30 %, 60 %: no doubt about the order
    data = {
        "mid": scenarios(200, set(range(60))),
        "best": scenarios(200, set(range(10))),
        "worst": scenarios(200, set(range(120))),
    }
    r = bootstrap_ranks(data)
    assert [(x.target, x.rank, x.low, x.high) for x in r.ranks] == [
        ("best", 1, 1, 1),
        ("mid", 2, 2, 2),
        ("worst", 3, 3, 3),
    ]
    assert r.rank_of("mid").rate == 0.30 and r.rank_of("mid").failing == 60
    assert (r.n, r.resamples, r.seed, r.confidence) == (200, 2000, 0, 0.95)
    assert [r.tied_with(t) for t in ("best", "mid", "worst")] == [[], [], []]
    assert r.ahead("best", "mid") and not r.ahead("mid", "best")
    assert r.lower_share["best"]["worst"] == 1.0 and r.lower_share["worst"]["best"] == 0.0


def test_bootstrap_ranks_ties() -> None:
    base = set(range(0, 100, 4))  # 25 of 100
    data = {
        "a": scenarios(100, base),
        "twin": scenarios(100, base),  # the very same failures: always level with a
        "close": scenarios(100, base | {1}),  # one more failing scenario
        "far": scenarios(100, base | set(range(1, 100, 4))),  # 50 of 100
    }
    r = bootstrap_ranks(data)
    by = {x.target: x for x in r.ranks}
    # ties share the best rank, in the point ranking and in every resample
    assert (by["a"].rank, by["twin"].rank, by["close"].rank, by["far"].rank) == (1, 1, 3, 4)
    assert (by["a"].low, by["a"].high) == (by["twin"].low, by["twin"].high) == (1, 1)
    assert r.lower_share["a"]["twin"] == 0.0 == r.lower_share["twin"]["a"]
    # one scenario apart: never lower than a, so a tie by the pairwise rule
    assert r.lower_share["close"]["a"] == 0.0 and r.lower_share["a"]["close"] < 0.975
    assert r.tied_with("a") == ["twin", "close"] and r.tied_with("twin") == ["a", "close"]
    assert r.tied_with("close") == ["a", "twin"] and r.tied_with("far") == []
    with pytest.raises(KeyError):
        r.tied_with("nobody")


def test_bootstrap_share_matches_the_exact_resampling_probability(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A fails 8 scenarios B passes, B fails 3 A passes, both fail 5, of 60. A resample
    # draws 60 scenarios uniformly with replacement, so its A-only and B-only counts are
    # multinomial (60; 8/60, 3/60, 49/60), and A's rate is below B's exactly when its
    # A-only count is below its B-only count: that probability, summed exactly, is what
    # the bootstrap share estimates
    n, a_only, b_only, both = 60, 8, 3, 5
    a = set(range(both + a_only))
    b = set(range(both)) | set(range(both + a_only, both + a_only + b_only))
    monkeypatch.setattr(ranks, "RESAMPLES", 20_000)  # ten times the report's: a tighter bound
    r = bootstrap_ranks({"A": scenarios(n, a), "B": scenarios(n, b)})
    probs = [a_only / n, b_only / n, 1 - (a_only + b_only) / n]
    cells = [(x, y) for x in range(n + 1) for y in range(n + 1 - x)]

    def exact(event: Callable[[int, int], bool]) -> float:
        return float(
            sum(multinomial.pmf([x, y, n - x - y], n, probs) for x, y in cells if event(x, y))
        )

    p_a_lower = exact(lambda x, y: x < y)
    p_b_lower = exact(lambda x, y: y < x)
    se = math.sqrt(0.25 / 20_000)
    assert r.lower_share["A"]["B"] == pytest.approx(p_a_lower, abs=4 * se)
    assert r.lower_share["B"]["A"] == pytest.approx(p_b_lower, abs=4 * se)
    # B is lower in 92 % of the resamples, short of the 97.5 % that would put it ahead:
    # 8 against 3 discordant scenarios of 60 is a tie by the pairwise rule
    assert p_b_lower == pytest.approx(0.9196, abs=1e-4)
    assert not r.ahead("B", "A") and r.tied_with("B") == ["A"]


def test_rank_min_is_scipy_min_ranking() -> None:
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 6, size=(300, 7))
    assert np.array_equal(_rank_min(counts), rankdata(counts, method="min", axis=1))


def test_bootstrap_ranks_deterministic_shared_keys_and_one_target() -> None:
    data: dict[str, dict[Any, bool | int]] = {
        "x": {("s", i): int(i % 3 == 0) for i in range(50)},
        "y": {("s", i): i % 4 == 0 for i in range(40, -5, -1)},  # other order, fewer, extra
    }
    r1 = bootstrap_ranks(data)
    r2 = bootstrap_ranks({"x": dict(reversed(list(data["x"].items()))), "y": data["y"]})
    assert r1 == r2  # the same ranking, whatever order the keys came in
    assert r1.n == 41  # keys 0..40: the ones both have
    assert r1.rank_of("x").failing == 14 and r1.rank_of("y").failing == 11
    # numpy's own booleans and integers (a column of an array) are fine too
    flags = np.array([True, False, True])
    arr = bootstrap_ranks({"np": dict(enumerate(flags)), "int": dict(enumerate(flags.astype(int)))})
    assert arr.rank_of("np").failing == arr.rank_of("int").failing == 2
    solo = bootstrap_ranks({"only": {1: True, 2: False}})
    assert [(x.rank, x.low, x.high) for x in solo.ranks] == [(1, 1, 1)] and solo.tied_with(
        "only"
    ) == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"a": {1: 2}}, r"a, scenario 1: failing must be 0/1 or a bool, got 2"),
        ({"a": {1: 0.5}}, "failing must be 0/1 or a bool"),
        ({"a": {1: 1.0}}, "failing must be 0/1 or a bool"),
        ({"a": {1: "yes"}}, "failing must be 0/1 or a bool"),
    ],
)
def test_bootstrap_ranks_rejects_bad_input(data: dict[str, dict[int, Any]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bootstrap_ranks(data)
