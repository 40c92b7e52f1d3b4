"""The statistics behind comparisons of targets, against independent values: statsmodels'
adjustments and McNemar test, published confidence intervals for a paired difference of
proportions, the power of the exact McNemar test (exact sum vs simulation), and the
bootstrap of target ranks. All deterministic (fixed seeds)."""

from __future__ import annotations

import pytest
from statsmodels.stats.contingency_tables import mcnemar

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
