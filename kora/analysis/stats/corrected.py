"""The corrected rate the report shows beside a judge-only rate (pure functions): the
judge's grade on every conversation, people's grade on a sample of them: a uniform one,
or one stratified on the judge's safety grade (`kora annotate --design stratified`).

Method: post-stratification on the judge's grade, cross-fitted. The cells are the
judge's grades of the criterion (failing, adequate, exemplary and, for a v2 mechanism
with a precondition, not triggered), within each stratum of the design when the sample
is stratified (within a stratum the graded conversations are a uniform sample). The
judge's grades say how the conversations fall into cells, people what each cell holds.

Where every cell holds two grades or more, the estimate is sum_h W_h p_h: each cell's
share of all N conversations times people's share in it (post-stratification). A cell
with one grade or none cannot be estimated from its own grades, and merging it with a
neighbour, as this module once did, takes the neighbour's rate for it: 16-20 % too low
in groups of 10 to 30 grades (issue 60). Instead the estimate is the prediction-powered
one with the judge recalibrated per cell and cross-fitted (Zrnic & Candes, Cross-
prediction-powered inference, PNAS 2024), leave-one-out: people's share over the graded
conversations, plus, for each graded conversation i, the mean over the ungraded ones of
a cell model fitted without i, minus that model's value for i. The model is people's
share in each cell; for a cell without another grade, people's share over all other
graded conversations (the whole group's rate). As the model for i never saw i, the
correction is unbiased whatever the model says (a cell holding no grade included), and
the estimate is unbiased for the rate of the population the conversations come from.
It is linear in the cells' shares: sum_h w_h p_h, with w_h (`cell_weights`) W_h where
every cell has two grades or more, and w_h = 0 where a cell has none.

The interval is the score interval of sum_h w_h p_h (kora.analysis.stats.score): the
rates theta for which (estimate - theta)^2 <= z^2 V(theta), V at the cells' rates most
likely under theta; with one cell it is Wilson's interval. People's grades alone are the
same with one cell (a stratum each when the sample is stratified): Wilson's interval.
bench/ppi_coverage.py measures the bias, coverage and width of both; the table is in
bench/README.md.

A v2 mechanism with a precondition has its rate among the conversations where it
applied, and which those are people say too: the ratio of two such estimates (people's
value, and whether it applied), its variance by the delta method (Cochran, Sampling
Techniques, 3rd ed., 6.11), each cell's spread drawn towards that of all graded
conversations by `SPREAD_PRIOR` grades' worth; its interval Wilson's at the effective
sample size.

Several people on one conversation: their values are averaged (the estimand is then the
share the average person would give); the variance p (1 - p) of a 0/1 grade bounds that
of an average.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kora.analysis.stats.paired import ALPHA
from kora.analysis.stats.rates import two_sided_z, wilson, wilson_share
from kora.analysis.stats.score import stratified_score

Floats = npt.NDArray[np.float64]

NOT_TRIGGERED = "notTriggered"
# the ratio's delta-method variance is estimated within each cell, which needs a few grades:
# each cell's spread carries this many grades' worth of the spread of all graded ones (a
# cell of 20 grades none of which applied has spread 0, and the interval held a rate of
# 0.2 among 12 applied of 30 graded in 0.90 of runs; with it 0.966)
SPREAD_PRIOR = 5
MIN_LABELLED = 10  # people's grades a group needs before it gets a corrected rate
METHOD = (
    "post-stratified on the judge's grade (within each stratum of the sample's design), "
    "cross-fitted: a grade of the judge people graded once or never taken at the rest of "
    "the group's rate, unbiased; score interval; a mechanism with a precondition: rate "
    "among the conversations it applied to (ratio); 95% intervals"
)


@dataclass(frozen=True)
class Corrected:
    """A corrected rate with its interval, and what it is compared with."""

    estimate: float
    low: float
    high: float
    n: int  # conversations people graded, of the N
    N: int
    humans: float  # people's share on the graded conversations alone (stratified: by stratum)
    humans_low: float
    humans_high: float
    judge: float  # the judge's share (among the conversations it found triggered)
    judge_low: float
    judge_high: float

    @property
    def judge_excludes(self) -> bool:
        """True when the judge-only interval does not hold the corrected estimate."""
        return not self.judge_low <= self.estimate <= self.judge_high


def cell_weights(graded: npt.ArrayLike, size: npt.ArrayLike) -> Floats:
    """The weight w_h of each cell's share of people's grades in the cross-fitted estimate
    (last axis over cells, any leading axes a batch): `graded` n_h, `size` N_h, the
    cell's conversations. With n graded of N, c = (N - n) / N and U_h the cell's share
    of the ungraded ones, the leave-one-out estimate sum_i [y_i + c (sum_h U_h g_-i(h) -
    g_-i(h_i))] / n, with g_-i people's share per cell without i, is sum_h w_h p_h with

        w_h = n_h (1 + c d_h) / n,
        d_h = n U_h / n_h - 1 + L + E        (two grades or more)
        d_h = (n - 1) U_h + L - (U_h - 1) / (n - 1) + E     (one grade)

    where L = sum over one-grade cells of (U_h - 1) / (n - 1) and E the ungraded share
    of the cells without a grade (w_h = 0 there). With every cell at two grades or more
    w_h = N_h / N, post-stratification's weights; the w_h sum to 1."""
    n_h = np.asarray(graded, dtype=float)
    big_h = np.asarray(size, dtype=float)
    n = n_h.sum(-1, keepdims=True)
    left = big_h.sum(-1, keepdims=True) - n
    c = left / (n + left)
    u = (big_h - n_h) / np.maximum(left, 1)
    one = n_h == 1
    less = np.maximum(n - 1, 1)
    lone = np.where(one, u - 1, 0.0).sum(-1, keepdims=True) / less
    empty = np.where(n_h == 0, u, 0.0).sum(-1, keepdims=True)
    d = np.where(one, (n - 1) * u - (u - 1) / less, n * u / np.maximum(n_h, 1) - 1)
    weights = np.maximum(n_h * (1 + c * (d + lone + empty)) / n, 0.0)
    out: Floats = weights / weights.sum(-1, keepdims=True)
    return out


def design_weights(size: Floats, graded: Floats, strata: npt.ArrayLike | None = None) -> Floats:
    """`cell_weights` within each stratum of a stratified sample, times the stratum's
    share of the conversations (`strata`: each cell's stratum, along the last axis; None:
    a uniform sample). NaN where a stratum holding conversations has no grade."""
    if strata is None:
        return cell_weights(graded, size)
    of = np.asarray(strata)
    out = np.zeros(np.broadcast(size, graded).shape)
    for s in np.unique(of):
        cells = of == s
        share = size[..., cells].sum(-1, keepdims=True) / size.sum(-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            within = cell_weights(graded[..., cells], size[..., cells])
        out[..., cells] = np.where(share > 0, share * within, 0.0)  # no conversations: none
    return out


def rate_interval(
    size: npt.ArrayLike,
    graded: npt.ArrayLike,
    kind: npt.ArrayLike,
    z: float,
    strata: npt.ArrayLike | None = None,
) -> tuple[Floats, Floats, Floats]:
    """(estimate, low, high) of the cross-fitted rate from each cell's conversations
    (`size`), people's grades in it (`graded`) and how many of those gave the kind counted
    (`kind`, a share of a grade where several people graded one); last axis over cells,
    `strata` each cell's stratum in a stratified sample (every one graded)."""
    n = np.asarray(graded, dtype=float)
    big = np.asarray(size, dtype=float)
    # a cell without a grade weighs nothing: one grade of 0 in it changes nothing
    return stratified_score(design_weights(big, n, strata), np.maximum(n, 1), kind, big.sum(-1), z)


def tally(
    keys: Sequence[tuple[str, str]], values: Floats
) -> tuple[Floats, Floats, Floats, npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Per cell (each distinct (stratum, cell) key): its items, how many have a value (not
    NaN), the sum of those values and its stratum; and each item's cell."""
    names = sorted(set(keys))
    index = {key: i for i, key in enumerate(names)}
    codes = np.fromiter((index[key] for key in keys), np.intp, len(keys))
    strata = {s: i for i, s in enumerate(dict.fromkeys(s for s, _ in names))}
    graded = ~np.isnan(values)
    k = len(names)
    size = np.bincount(codes, minlength=k).astype(float)
    n = np.bincount(codes[graded], minlength=k).astype(float)
    total = np.bincount(codes[graded], weights=values[graded], minlength=k).astype(float)
    return size, n, total, np.array([strata[s] for s, _ in names], dtype=np.intp), codes


def rate(
    size: Floats, graded: Floats, kind: Floats, strata: npt.NDArray[np.intp], z: float
) -> tuple[float, float, float]:
    estimate, low, high = rate_interval(size, graded, kind, z, strata)
    return float(estimate), float(low), float(high)


def corrected_rate(
    cells: Sequence[str],
    judge: npt.ArrayLike,
    human: npt.ArrayLike,
    triggered: npt.ArrayLike | None = None,
    *,
    strata: Sequence[str] | None = None,
) -> Corrected | None:
    """The corrected rate of one kind (failing, say) of one criterion over N conversations.

    `cells[i]`: the judge's grade of conversation i (or "notTriggered"); `judge[i]`: 1 when
    that grade is the kind counted, else 0; `human[i]`: people's value (1 / 0, or a share
    when several graded it), NaN where nobody did; `triggered[i]`, for a mechanism with a
    precondition only: the share of its graders who found it applied (NaN where nobody
    graded it); `strata[i]`: conversation i's stratum in a stratified sample (None: a
    uniform sample). None when people graded fewer than MIN_LABELLED conversations
    (or, for a mechanism, found it applied in none of them).
    """
    f = np.asarray(judge, dtype=float)
    y = np.asarray(human, dtype=float)
    if not f.size == y.size == len(cells):
        raise ValueError(f"cells, judge, human: {len(cells)}, {f.size}, {y.size} items")
    by = [""] * len(cells) if strata is None else list(strata)
    if len(by) != len(cells):
        raise ValueError(f"strata: {len(by)} for {len(cells)} items")
    graded = ~np.isnan(y)
    n = int(graded.sum())
    if n < MIN_LABELLED:
        return None
    z = two_sided_z(ALPHA)
    judged = np.array([c != NOT_TRIGGERED for c in cells])
    k_judge, n_judge = round(float(f[judged].sum())), int(judged.sum())
    judge_low, judge_high = wilson(k_judge, n_judge)
    if (tally([(s, "") for s in by], y)[1] == 0).any():
        return None  # a stratum of the design without a grade: its rate is not known
    keys = [list(zip(by, cells, strict=True)), [(s, "") for s in by]]  # with the judge, without
    found, alone = _rates(keys, y, triggered, z)
    if found is None or alone is None:
        return None
    estimate, low, high = found
    humans, humans_low, humans_high = alone
    return Corrected(
        estimate=estimate,
        low=low,
        high=high,
        n=n,
        N=f.size,
        humans=humans,
        humans_low=humans_low,
        humans_high=humans_high,
        judge=k_judge / n_judge if n_judge else 0.0,
        judge_low=judge_low,
        judge_high=judge_high,
    )


def _rates(
    keys: Sequence[Sequence[tuple[str, str]]], y: Floats, triggered: npt.ArrayLike | None, z: float
) -> list[tuple[float, float, float] | None]:
    """`rate` (`ratio` with `triggered`) for each way `keys` puts the items into cells."""
    if triggered is None:
        return [rate(*tally(k, y)[:4], z) for k in keys]
    t = np.asarray(triggered, dtype=float)
    if t.size != y.size or not np.array_equal(np.isnan(t), np.isnan(y)):
        raise ValueError("triggered: one value per item, NaN exactly where human is")
    return [ratio(k, y, t, z) for k in keys]


def ratio(
    keys: Sequence[tuple[str, str]], y: Floats, t: Floats, z: float
) -> tuple[float, float, float] | None:
    """The ratio of the cross-fitted means of y and t (NaN where not graded) over the cells
    `keys` ((stratum, cell) of each item), with its delta-method interval: (estimate,
    low, high); None when no graded item has t > 0."""
    size, n_h, sum_y, strata, codes = tally(keys, y)
    w = design_weights(size, n_h, strata)
    graded = ~np.isnan(y)
    cg, k = codes[graded], n_h.size
    per = np.maximum(n_h, 1)
    ybar = sum_y / per
    tbar = np.bincount(cg, weights=t[graded], minlength=k) / per
    denominator = float(w @ tbar)
    if denominator <= 0:
        return None
    r = float(w @ ybar) / denominator
    u = y[graded] - r * t[graded]
    ubar = ybar - r * tbar
    dev = u - ubar[cg]
    pooled = float(np.var(u, ddof=1)) if u.size > 1 else 0.25
    s2 = (np.bincount(cg, weights=dev * dev, minlength=k) + SPREAD_PRIOR * pooled) / (
        np.maximum(n_h - 1, 0) + SPREAD_PRIOR
    )
    variance = (
        float((w * w) @ (s2 / per)) + float(w @ (ubar * ubar)) / size.sum()
    ) / denominator**2
    r = min(1.0, max(0.0, r))
    # the Wilson interval at the effective sample size (the number of binomial draws with
    # this variance), as survey estimates of a share do (Korn & Graubard 1998, with
    # Clopper-Pearson's): a normal interval misses low at a few failing conversations
    n_eff = r * (1 - r) / variance if variance > 0 and 0 < r < 1 else float(t[graded].sum())
    low, high = wilson_share(r, max(float(n_eff), 1e-9), z)
    return r, low, high
