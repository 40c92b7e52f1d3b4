"""The statistics behind comparisons of targets, against independent values: statsmodels'
adjustments and McNemar test, published confidence intervals for a paired difference of
proportions, the power of the exact McNemar test (exact sum vs simulation), and the
bootstrap of target ranks. All deterministic (fixed seeds)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from kora.stats.difference import Method, newcombe_paired, paired_difference_ci, tango_paired
from kora.stats.paired import adjust_pvalues, holm, sign_test

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
        (([0.1], "holm", 0.0), r"alpha must be in \(0, 1\)"),
        (([0.1], "holm", 1.0), r"alpha must be in \(0, 1\)"),
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
