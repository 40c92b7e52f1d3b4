"""Rates corrected for the judge's errors: prediction-powered inference (PPI; Angelopoulos
et al., Science 2023) with the power tuning of PPI++ (Angelopoulos, Duchi, Zrnic 2023).

The judge grades all N conversations, people grade n of them. The corrected rate is
lambda x the judge's rate on the conversations people did not grade, plus the mean of
(person - lambda x judge) on those they did: lambda = 0 is the humans-only (classical)
estimate, 1 plain PPI; by default lambda is the value of least estimated variance.

Choices:

- The target is the rate in the population the conversations are drawn from, as in the
  paper (and as the judge-only interval on N and a humans-only one on n estimate it).
- The unlabelled set is the N - n conversations people did not grade, disjoint from the
  graded ones as in the paper, so the two parts of the estimate are independent. One
  array per item (`human` NaN where not graded): no prediction is passed twice.
- Sample variances (ddof=1); the paper and `ppi_py` use ddof=0, which narrows the
  interval by 5 % at 10 labels and halves a 2-label stratum's variance.
- lambda minimises var(Y - lambda f)/n + lambda^2 var(f_u)/N_u exactly: cov(Y, f) /
  (var(f_labelled) + n/N_u var(f_unlabelled)), where PPI++ pools the two variances of f.
  Asymptotically the same; this one gives `se <= classical_se` in every sample.
- `strata`: for graded items that are a stratified sample (a fixed number drawn in each
  stratum, so inclusion probabilities differ between strata), or post-strata of a
  uniform one. Stratified PPI: sum_h W_h theta_h, W_h = N_h/N, one lambda for all strata
  (a per-stratum one from 3 labels is noise), variance sum_h W_h^2 var_h plus
  (1/N) sum_h W_h (theta_h - theta)^2 as the strata's shares are themselves sampled (zero
  with one stratum, so one stratum is plain PPI). That is the estimator with weights
  N_h/n_h, with the design's variance. Weights alone are not taken: they cannot place the
  ungraded conversations in strata, nor see a stratum no one graded (`UnsampledStratum`).
  The report does not use this module: its corrected rates are kora.analysis.stats.
  corrected's (post-stratified on the judge's grade, score intervals), whose coverage at
  a few failing grades this normal interval does not reach.
- lambda acts in a stratum with at least 2 graded and 2 ungraded items and a judge that
  does not say one thing throughout; elsewhere the stratum's estimate is its humans-only
  mean, and where it acts in no stratum the lambda reported is 0, the one in effect.
  With 0/1 grades such a stratum's interval is Wilson's, combined over strata by MOVER:
  the normal interval misses low when a stratum has a few failing labels. A lone
  non-0/1 label's variance is bounded by 1/4, the most a value in [0, 1] can have.
- Estimate and bounds are clipped to [0, 1]; `se` is not, so standard errors compare.

Own implementation rather than the `ppi-python` package: that pulls ~30 packages (numba,
llvmlite, statsmodels, pandas, gdown, requests) for 20 lines of maths, and has per-item
weights but no strata. tests/test_ppi.py checks this against ppi_py's numbers.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kora.analysis.stats.rates import two_sided_z

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]

LONE_LABEL_VARIANCE = 0.25  # the largest variance of a value in [0, 1]


class UnsampledStratum(ValueError):
    """A stratum has conversations but people graded none: its rate cannot be estimated."""


@dataclass(frozen=True)
class PPIEstimate:
    """A corrected rate with its interval, and the humans-only and judge-only figures."""

    estimate: float
    low: float
    high: float
    se: float
    n_labelled: int
    N: int
    lam: float
    classical: float
    classical_low: float
    classical_high: float
    classical_se: float
    naive: float
    naive_low: float
    naive_high: float
    alpha: float

    @property
    def ci(self) -> tuple[float, float]:
        return self.low, self.high

    @property
    def classical_ci(self) -> tuple[float, float]:
        return self.classical_low, self.classical_high

    @property
    def naive_ci(self) -> tuple[float, float]:
        return self.naive_low, self.naive_high


def ppi_mean(
    predictions: npt.ArrayLike,
    human: npt.ArrayLike,
    *,
    strata: Sequence[Hashable] | npt.NDArray[np.generic] | None = None,
    alpha: float = 0.05,
    lam: float | None = None,
) -> PPIEstimate:
    """The PPI++ estimate of a rate (mean of values in [0, 1]) with its 1 - alpha interval.

    `predictions`: the judge's value for each of the N items. `human`: people's value for
    the same items, NaN where people did not grade one. `strata`: each item's stratum
    when the graded items are a stratified sample. `lam`: None tunes it; 1 is plain PPI,
    0 the humans-only estimate.
    """
    f = _unit_values(predictions, "predictions", nan_ok=False)
    y = _unit_values(human, "human", nan_ok=True)
    big_n = f.size
    if y.size != big_n:
        raise ValueError(
            f"human: {y.size} values for {big_n} predictions; give one per item, NaN "
            "where people did not grade it"
        )
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: must be in (0, 1), got {alpha}")
    if lam is not None and not math.isfinite(lam):
        raise ValueError(f"lam: must be a finite number or None, got {lam}")
    labelled = ~np.isnan(y)
    n = int(labelled.sum())
    if n == 0:
        raise ValueError("human: no item graded by people (all NaN); PPI needs at least one")
    codes, names = _codes(strata, big_n)
    k = len(names)

    cl, cu = codes[labelled], codes[~labelled]
    n_h, ybar, dy = _centre(y[labelled], cl, k)
    _, fbar_l, dfl = _centre(f[labelled], cl, k)
    nu_h, fbar_u, dfu = _centre(f[~labelled], cu, k)
    if (n_h == 0).any():
        empty = [names[i] for i in np.flatnonzero(n_h == 0)]
        raise UnsampledStratum(
            f"strata: no item graded by people in {len(empty)} of {k} strata "
            f"(first: {empty[:3]!r}); their rate is unknown: merge them with others"
        )
    s2y, syf, s2fl = _cov(dy, dy, cl, n_h), _cov(dy, dfl, cl, n_h), _cov(dfl, dfl, cl, n_h)
    s2fu = _cov(dfu, dfu, cu, nu_h)
    fmax, fmin = np.full(k, -np.inf), np.full(k, np.inf)
    np.maximum.at(fmax, codes, f)
    np.minimum.at(fmin, codes, f)
    # where the judge says one thing throughout, Y - lambda f varies as Y: lambda is idle
    active = (n_h >= 2) & (nu_h >= 2) & (fmax > fmin)
    binary = np.bincount(cl, weights=(y[labelled] % 1 != 0), minlength=k) == 0

    w = (n_h + nu_h) / big_n
    safe_n, safe_nu = np.maximum(n_h, 1), np.maximum(nu_h, 1)
    var_y = np.where(n_h >= 2, s2y / safe_n, LONE_LABEL_VARIANCE)
    cov_yf = np.where(active, syf / safe_n, 0.0)
    var_f = np.where(active, s2fl / safe_n + s2fu / safe_nu, 0.0)
    shift = np.where(active, fbar_u - fbar_l, 0.0)  # theta_h(lambda) = ybar_h + lambda shift_h
    e, g = ybar - w @ ybar, shift - w @ shift
    # the estimated variance is quadratic in lambda, a - 2 b lambda + c lambda^2: the
    # within-strata part, and the between-strata part (the strata's shares are sampled)
    b = float((w * w) @ cov_yf - w @ (e * g) / big_n)
    c = float((w * w) @ var_f + w @ (g * g) / big_n)
    if lam is None:
        lam = min(1.0, max(0.0, b / c)) if c > 0 else 0.0
    if not active.any():
        lam = 0.0  # lambda acts nowhere: the estimate is the humans-only one, and says so

    z = two_sided_z(alpha)
    wilson_low, wilson_high = _wilson(ybar, n_h.astype(float), z)

    def interval(lam: float) -> tuple[float, float, float, float]:
        """estimate, se, low, high"""
        estimate = float(w @ ybar) + lam * float(w @ shift)
        within = np.maximum(0.0, var_y - 2 * lam * cov_yf + lam * lam * var_f)
        between = float(w @ (e + lam * g) ** 2) / big_n
        # MOVER (Zou & Donner 2008): a stratum whose estimate is its humans-only share of
        # 0/1 grades brings its Wilson interval's two sides, which stay honest at a few
        # failing labels where the normal one misses low; the others their normal sides
        wilson = binary & (~active | (lam == 0))
        normal = z * np.sqrt(within)
        down = np.where(wilson, ybar - wilson_low, normal)
        up = np.where(wilson, wilson_high - ybar, normal)
        between_z2 = z * z * between
        low = estimate - math.sqrt(float((w * w) @ (down * down)) + between_z2)
        high = estimate + math.sqrt(float((w * w) @ (up * up)) + between_z2)
        return estimate, math.sqrt(float((w * w) @ within) + between), low, high

    estimate, se, low, high = interval(lam)
    classical, classical_se, classical_low, classical_high = interval(0.0)
    naive = float(f.mean())
    naive_low, naive_high = _wilson(np.array([naive]), np.array([float(big_n)]), z)
    return PPIEstimate(
        estimate=_clip(estimate),
        low=_clip(low),
        high=_clip(high),
        se=se,
        n_labelled=n,
        N=big_n,
        lam=float(lam),
        classical=_clip(classical),
        classical_low=_clip(classical_low),
        classical_high=_clip(classical_high),
        classical_se=classical_se,
        naive=naive,
        naive_low=float(naive_low[0]),
        naive_high=float(naive_high[0]),
        alpha=alpha,
    )


def excludes(interval: tuple[float, float], value: float) -> bool:
    """True when `value` lies outside `interval`: the report's mark where the judge-only
    interval excludes the corrected estimate."""
    low, high = interval
    return not low <= value <= high


def _unit_values(values: npt.ArrayLike, name: str, *, nan_ok: bool) -> Floats:
    try:
        x = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name}: not numbers ({err})") from err
    if x.ndim != 1:
        raise ValueError(f"{name}: one value per item (1-D), got shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name}: no items")
    known = x[~np.isnan(x)] if nan_ok else x
    if not nan_ok and np.isnan(x).any():
        raise ValueError(f"{name}: NaN at item {int(np.flatnonzero(np.isnan(x))[0])}")
    if known.size and ((known < 0) | (known > 1)).any():
        raise ValueError(
            f"{name}: values must be in [0, 1] (rates), got {known.min()}..{known.max()}"
        )
    return x


def _codes(
    strata: Sequence[Hashable] | npt.NDArray[np.generic] | None, size: int
) -> tuple[Ints, list[Hashable]]:
    if strata is None:
        return np.zeros(size, dtype=np.intp), [None]
    keys = strata.tolist() if isinstance(strata, np.ndarray) else list(strata)
    if len(keys) != size:
        raise ValueError(f"strata: {len(keys)} keys for {size} predictions; give one per item")
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(s, len(index)) for s in keys), np.intp, size)
    return codes, list(index)


def _centre(x: Floats, codes: Ints, k: int) -> tuple[Ints, Floats, Floats]:
    """Per stratum: count and mean; per item: its deviation from its stratum's mean."""
    count = np.bincount(codes, minlength=k)
    total = np.bincount(codes, weights=x, minlength=k)
    mean = np.divide(total, count, out=np.zeros(k), where=count > 0)
    return count, mean, x - mean[codes]


def _cov(dx: Floats, dy: Floats, codes: Ints, count: Ints) -> Floats:
    """Per-stratum sample covariance (ddof=1) from deviations; 0 below 2 items."""
    k = count.size
    s = np.bincount(codes, weights=dx * dy, minlength=k)
    return np.divide(s, count - 1, out=np.zeros(k), where=count >= 2)


def _wilson(p: Floats, n: Floats, z: float) -> tuple[Floats, Floats]:
    """Wilson score intervals of shares p of n (kora.analysis.stats.rates.wilson takes whole counts
    one at a time; a judge's probabilities give a share)."""
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * np.sqrt(np.maximum(0.0, p * (1 - p)) / n + z2 / (4 * n * n)) / denom
    # at a share of 0 or 1 the formula gives the end up to rounding: exactly, as there
    low = np.where(p <= 0, 0.0, np.maximum(0.0, centre - half))
    high = np.where(p >= 1, 1.0, np.minimum(1.0, centre + half))
    return low, high


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))
