"""Is the new judge better? The change in its agreement with people over the old judge's,
on the same conversations, with a seeded paired bootstrap interval (pure functions).

The bootstrap resamples conversations, each with its three grades (person, old judge,
new judge), so the interval knows that both judges meet the same hard conversations:
two separate intervals for the two agreements would be far too wide to see a change.
Exact agreement, and Cohen's kappa with quadratic weights (the grades are ordered;
the same figure as sklearn's cohen_kappa_score(weights="quadratic"), computed for all
resamples at once). The change is significant when its 1 - ALPHA percentile interval
excludes 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kora.benchmarks.schemas import GRADES

Ints = npt.NDArray[np.intp]
Floats = npt.NDArray[np.float64]

CELLS_A_CHUNK = 4_000_000  # resamples x conversations held at once: ~32 MB of indices
RESAMPLES = 2000
ALPHA = 0.05


@dataclass(frozen=True)
class JudgeChange:
    """New judge minus old judge; agreements are shares of conversations."""

    n: int
    agreement_old: float
    agreement_new: float
    agreement_change: float
    agreement_low: float
    agreement_high: float
    significant: bool
    kappa_old: float | None  # None where kappa is undefined (one grade throughout)
    kappa_new: float | None
    kappa_change: float | None
    kappa_low: float | None
    kappa_high: float | None
    kappa_significant: bool | None
    resamples: int
    seed: int
    alpha: float


def judge_change(
    human: Sequence[str],
    old: Sequence[str],
    new: Sequence[str],
    *,
    seed: int = 0,
) -> JudgeChange:
    """Agreement with `human` of the `new` judge's grades against the `old` judge's, the
    same conversations in the same order: grades of GRADES, at least one conversation
    (kora.analysis.stats.against passes those all three graded, never none)."""
    h, o, w = _codes(human), _codes(old), _codes(new)
    k = len(GRADES)
    hits_old, hits_new = (o == h).astype(float), (w == h).astype(float)
    pairs_old, pairs_new = h * k + o, h * k + w

    rng = np.random.default_rng(seed)
    n = h.size
    agree, kappas = [], []
    chunk = max(1, CELLS_A_CHUNK // n)
    for start in range(0, RESAMPLES, chunk):
        idx = rng.integers(0, n, size=(min(chunk, RESAMPLES - start), n))
        agree.append(hits_new[idx].mean(axis=1) - hits_old[idx].mean(axis=1))
        kappas.append(_kappa(pairs_new[idx], k) - _kappa(pairs_old[idx], k))
    q = [ALPHA / 2, 1 - ALPHA / 2]
    low, high = (float(x) for x in np.quantile(np.concatenate(agree), q))

    everyone = np.arange(n)[None, :]
    k_old, k_new = _kappa(pairs_old[everyone], k)[0], _kappa(pairs_new[everyone], k)[0]
    boot = np.concatenate(kappas)
    boot = boot[~np.isnan(boot)]  # resamples where a kappa is undefined say nothing
    defined = not (np.isnan(k_old) or np.isnan(k_new)) and boot.size > 0
    k_low, k_high = (float(x) for x in np.quantile(boot, q)) if defined else (np.nan, np.nan)
    a_old, a_new = float(hits_old.mean()), float(hits_new.mean())
    return JudgeChange(
        n=n,
        agreement_old=a_old,
        agreement_new=a_new,
        agreement_change=a_new - a_old,
        agreement_low=low,
        agreement_high=high,
        significant=low > 0 or high < 0,
        kappa_old=None if np.isnan(k_old) else float(k_old),
        kappa_new=None if np.isnan(k_new) else float(k_new),
        kappa_change=float(k_new - k_old) if defined else None,
        kappa_low=k_low if defined else None,
        kappa_high=k_high if defined else None,
        kappa_significant=(k_low > 0 or k_high < 0) if defined else None,
        resamples=RESAMPLES,
        seed=seed,
        alpha=ALPHA,
    )


def _codes(labels: Sequence[str]) -> Ints:
    index: dict[str, int] = {g: i for i, g in enumerate(GRADES)}
    return np.fromiter((index[x] for x in labels), np.intp, len(labels))


def _kappa(pairs: Ints, k: int) -> Floats:
    """Quadratic-weighted Cohen's kappa of each row of (person x k + judge) codes; NaN
    where undefined (both raters give one and the same grade throughout)."""
    rows, n = pairs.shape
    offsets = (np.arange(rows) * k * k)[:, None]
    counts = np.bincount((pairs + offsets).ravel(), minlength=rows * k * k)
    observed = counts.reshape(rows, k, k).astype(float)
    expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :] / n
    i = np.arange(k)
    weights = (i[:, None] - i[None, :]) ** 2
    disagree = (observed * weights).sum(axis=(1, 2))
    chance = (expected * weights).sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(chance > 0, 1 - disagree / chance, np.nan)
