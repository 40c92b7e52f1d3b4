"""Is the new judge better (kora.analysis.stats.judge_change): agreement and quadratic-weighted
kappa against scikit-learn and the paired bootstrap redone by hand."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from kora.analysis.stats import judge_change as module
from kora.analysis.stats.judge_change import judge_change
from kora.benchmarks.schemas import GRADES

pytestmark = pytest.mark.timeout(60)


def graded(rng: np.random.Generator, n: int, error_old: float, error_new: float) -> tuple[list[str], list[str], list[str]]:  # fmt: skip
    """People's grades, and two judges each off by one grade in a share of conversations."""
    human = rng.integers(0, 3, n)

    def judge(error: float) -> list[str]:
        off = rng.random(n) < error
        step = np.where(human == 0, 1, np.where(human == 2, -1, rng.choice([-1, 1], n)))
        return [GRADES[g] for g in np.where(off, human + step, human)]

    return [GRADES[g] for g in human], judge(error_old), judge(error_new)


def test_point_figures_are_scikit_learn_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "RESAMPLES", 50)  # the point figures only: few resamples
    rng = np.random.default_rng(3)
    for _ in range(10):
        human, old, new = graded(rng, int(rng.integers(5, 300)), 0.4, 0.2)
        r = judge_change(human, old, new)
        assert r.agreement_old == np.mean([a == b for a, b in zip(human, old, strict=True)])
        assert r.agreement_new == np.mean([a == b for a, b in zip(human, new, strict=True)])
        for mine, judge in ((r.kappa_old, old), (r.kappa_new, new)):
            sk = cohen_kappa_score(human, judge, labels=list(GRADES), weights="quadratic")
            assert mine == pytest.approx(sk, abs=1e-12)


def test_the_paired_bootstrap_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same resamples (one draw of 300 x n indices from the seed), each figure by
    scikit-learn, the percentile interval by numpy."""
    monkeypatch.setattr(module, "RESAMPLES", 300)  # each redone by scikit-learn
    rng = np.random.default_rng(4)
    human, old, new = graded(rng, 120, 0.35, 0.25)
    r = judge_change(human, old, new, seed=17)
    idx = np.random.default_rng(17).integers(0, 120, size=(300, 120))
    h, o, w = np.array(human), np.array(old), np.array(new)
    agree = [np.mean(w[i] == h[i]) - np.mean(o[i] == h[i]) for i in idx]
    kappa = [
        cohen_kappa_score(h[i], w[i], labels=list(GRADES), weights="quadratic")
        - cohen_kappa_score(h[i], o[i], labels=list(GRADES), weights="quadratic")
        for i in idx
    ]
    assert (r.agreement_low, r.agreement_high) == pytest.approx(np.quantile(agree, [0.025, 0.975]))
    assert (r.kappa_low, r.kappa_high) == pytest.approx(np.quantile(kappa, [0.025, 0.975]))


def test_a_better_judge_is_significant_and_the_same_judge_is_not() -> None:
    rng = np.random.default_rng(5)
    human, old, new = graded(rng, 300, 0.40, 0.15)
    better = judge_change(human, old, new)
    assert better.agreement_change == pytest.approx(better.agreement_new - better.agreement_old)
    assert 0 < better.agreement_low < better.agreement_change < better.agreement_high
    assert better.significant and better.kappa_significant
    same = judge_change(human, old, old)
    assert same.agreement_change == same.agreement_low == same.agreement_high == 0
    assert not same.significant and not same.kappa_significant
    assert judge_change(human, old, new, seed=1) == judge_change(human, old, new, seed=1)
    worse = judge_change(human, new, old)
    assert worse.significant and worse.agreement_high < 0


def test_kappa_undefined_with_one_grade_throughout() -> None:
    r = judge_change(["adequate"] * 20, ["adequate"] * 20, ["adequate"] * 19 + ["failing"])
    assert r.kappa_old is None and r.kappa_change is None and r.kappa_significant is None
    assert r.agreement_change == pytest.approx(-0.05)
