"""The score interval of a post-stratified rate: sum_h W_h p_h, each cell's p_h estimated
from the share of its graded conversations people gave the kind counted.

Inverting the score test, as Wilson's interval does for one share (to which this reduces
with one cell): theta is in the interval when (estimate - theta)^2 <= z^2 V(theta), where
V(theta) is the estimate's variance at the cells' rates most likely under theta, i.e.
maximising the binomial likelihood of the grades on the line sum_h W_h p_h = theta.
Evaluating the variance there, not at the estimate, is what keeps the interval honest
when a cell holds no failing grade at all: a normal interval then has width zero on that
side, and adding each cell's own Wilson interval in quadrature (MOVER) grows with the
number of such cells.

The constrained rates are found along a Lagrange multiplier mu: for each mu every cell's
rate solves n_h (p_hat_h - p_h) = mu W_h p_h (1 - p_h), a quadratic with one root in
[0, 1], and sum_h W_h p_h falls from 1 to 0 as mu goes from -inf to +inf. Each end of
the interval is one bisection along mu (log |mu|, one side each), all estimates of a
batch at once.

V(theta) = sum_h W_h^2 p_h (1 - p_h) / n_h + (1/N) sum_h W_h (p_h - theta)^2: the second
term because the cells' shares W_h are themselves the draw of N conversations from the
population whose rate is the estimand (zero with one cell).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]

LOG_SPAN = 40.0  # |mu| from e^-40 (the estimate) to e^40 (a rate of 0 or 1)
STEPS = 48  # bisection halvings of that span: log |mu| to 3e-13, far below 6 decimals


def constrained_rates(p_hat: Floats, n: Floats, share: Floats, mu: Floats) -> Floats:
    """Each cell's rate maximising the binomial likelihood of its grades for the Lagrange
    multiplier `mu` (broadcast over cells): below p_hat for mu > 0, above for mu < 0.
    Written without subtracting near-equal numbers, so a cell at 0 stays exactly 0."""
    a = np.abs(mu) * share
    c = n * p_hat
    # mu >= 0: a p^2 - (a + n) p + c = 0, the root in [0, p_hat]
    b = a + n
    down = 2 * c / (b + np.sqrt(np.maximum(b * b - 4 * a * c, 0.0)))
    # mu < 0: a p^2 + (n - a) p - c = 0, the root in [p_hat, 1]
    d = n - a
    root = np.sqrt(d * d + 4 * a * c)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(d >= 0, 2 * c / np.where(d + root > 0, d + root, 1.0), (root - d) / (2 * a))
    return np.clip(np.where(mu >= 0, down, up), 0.0, 1.0)


def variance(p: Floats, n: Floats, share: Floats, population: Floats) -> tuple[Floats, Floats]:
    """(theta, V(theta)) at cell rates `p`."""
    theta = (share * p).sum(-1)
    within = (share * share * p * (1 - p) / n).sum(-1)
    between = (share * (p - theta[..., None]) ** 2).sum(-1) / population
    return theta, within + between


def stratified_score(
    share: npt.ArrayLike,
    graded: npt.ArrayLike,
    kind: npt.ArrayLike,
    population: npt.ArrayLike,
    z: float,
) -> tuple[Floats, Floats, Floats]:
    """(estimate, low, high) of sum_h W_h k_h / n_h, with the last axis over cells.

    `share`: W_h, the cells' weights (summing to 1); `graded`: n_h > 0, conversations
    people graded in the cell; `kind`: k_h, how many of those people gave the kind counted (a share of
    n_h when several graded one); `population`: N, the conversations the shares come
    from.
    """
    w = np.asarray(share, dtype=float)
    n = np.asarray(graded, dtype=float)
    k = np.asarray(kind, dtype=float)
    big_n = np.asarray(population, dtype=float)
    if (n <= 0).any():
        raise ValueError("graded: every cell needs a graded conversation")
    p_hat = np.clip(k / n, 0.0, 1.0)
    estimate = (w * p_hat).sum(-1)
    # both ends at once on a leading axis: mu > 0 pulls the rates down (the lower end)
    sign = np.array([1.0, -1.0]).reshape((2,) + (1,) * estimate.ndim)
    inside = np.full((2, *estimate.shape), -LOG_SPAN)
    outside = np.full((2, *estimate.shape), LOG_SPAN)

    def theta_and_excess(s: Floats) -> tuple[Floats, Floats]:
        p = constrained_rates(p_hat, n, w, sign[..., None] * np.exp(s)[..., None])
        theta, v = variance(p, n, w, big_n)
        return theta, (estimate - theta) ** 2 - z * z * v

    for _ in range(STEPS):
        mid = (inside + outside) / 2
        held = theta_and_excess(mid)[1] <= 0
        inside, outside = np.where(held, mid, inside), np.where(held, outside, mid)
    ends = theta_and_excess(outside)[0]
    low = np.where(estimate <= 0, 0.0, np.minimum(ends[0], estimate))
    high = np.where(estimate >= 1, 1.0, np.maximum(ends[1], estimate))
    return estimate, np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)
