"""The corrected rate the report shows beside a judge-only rate (pure functions): the
judge's grade on every conversation, people's grade on a sample of them: a uniform one,
or one stratified on the judge's safety grade (`kora annotate --design stratified`),
whose unequal chances of being graded come in as design weights.

Method: prediction-powered inference with the judge recalibrated per grade, which is
post-stratification on the judge's grade of the criterion (Fisch et al., Stratified
prediction-powered inference, NeurIPS 2024). The cells are the judge's grades (failing,
adequate, exemplary and, for a v2 mechanism with a precondition, not triggered). In each
cell the rate is people's share among the conversations of that cell they graded
(weighted by the design where the sample is stratified: Hajek's estimator), and the
cells are weighted by their share of all conversations: the judge's grades say how the
conversations fall into cells, people what each cell really holds. Where the judge's
grades carry information the cells' rates differ and the estimate's variance, sum_h
W_h^2 p_h (1 - p_h) / n_h, is below people's share's p (1 - p) / n (by the law of total
variance, on average over uniform samples); where they carry none it is the same.

The interval is the score interval of the post-stratified rate (kora.analysis.stats.score):
one inversion over all cells, Wilson's interval when there is one, with a half-step
continuity correction on the end towards the nearer bound. It replaced MOVER over the
cells' own Wilson intervals, whose upper end grew with the number of cells holding no
failing grade (wider than people's grades alone in 96 % of simulated runs at a rate of
0.02 with 100 grades), and a normal interval, which misses at a few failing grades.

PPI++'s power-tuning lambda (Angelopoulos, Duchi, Zrnic 2023) has no part here: a
judge that gives one of a few grades is a step function, and per-cell means are the best
recalibration of a step function, of which lambda x judge + constant is one. Its normal
interval is also what held the true rate in only 83-93 % of simulated runs at a few
failing grades (kora.analysis.stats.ppi keeps it, checked against ppi_py).

A cell people graded no conversation of is merged with its neighbour in grade order (the
one with fewer grades); with one cell left the estimate is people's share, with Wilson's
interval (corrected on one side). Merging on the number of grades alone, which does not
depend on what people said, keeps the interval's coverage: choosing between intervals on
their width would not. bench/ppi_coverage.py measures coverage and width against
people's grades alone; the table is in bench/README.md.

A v2 mechanism with a precondition has its rate among the conversations where it applied,
and which those are people say too: the rate is a ratio, (share triggered and graded
the kind) / (share triggered), both post-stratified the same way; its variance by the
delta method (Cochran, Sampling Techniques, 3rd ed., 6.11: the combined ratio estimate,
here over post-strata), its interval Wilson's at the effective sample size.

Several people on one conversation: their values are averaged (the estimand is then the
share the average person would give); the variance p (1 - p) of a 0/1 grade bounds that
of an average.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kora.analysis.stats.rates import two_sided_z, wilson, wilson_share
from kora.analysis.stats.score import stratified_score

Floats = npt.NDArray[np.float64]

NOT_TRIGGERED = "notTriggered"
CELL_ORDER = ("failing", "adequate", "exemplary", NOT_TRIGGERED)
MIN_CELL = 1  # people's grades a post-stratification cell needs, else it is merged
# the ratio's delta-method variance is estimated within each cell, which needs a few grades
MIN_RATIO_CELL = 5
MIN_LABELLED = 10  # people's grades a group needs before it gets a corrected rate
METHOD = (
    "post-stratified on the judge's grade (PPI with the judge recalibrated per grade; a "
    "grade nobody graded merged with its neighbour), design-weighted where the sample is "
    "stratified; score interval with a half-step correction on the side of the nearer "
    "bound; a mechanism with a precondition: rate among the conversations it applied to "
    "(ratio); 95% intervals"
)


@dataclass(frozen=True)
class Corrected:
    """A corrected rate with its interval, and what it is compared with."""

    estimate: float
    low: float
    high: float
    n: int  # conversations people graded, of the N
    N: int
    humans: float  # people's share on the graded conversations alone
    humans_low: float
    humans_high: float
    judge: float  # the judge's share (among the conversations it found triggered)
    judge_low: float
    judge_high: float
    cells: tuple[str, ...]  # the post-strata after merging, e.g. ("failing", "adequate+exemplary")
    ratio: bool  # a rate among triggered conversations (delta-method interval)

    @property
    def judge_excludes(self) -> bool:
        """True when the judge-only interval does not hold the corrected estimate."""
        return not self.judge_low <= self.estimate <= self.judge_high


@dataclass(frozen=True)
class Cells:
    """Per post-stratification cell: its conversations, how many of them people graded,
    and over those the sums of the design weights, of their squares and of weight x
    people's value (all weights equal in a uniform sample)."""

    names: tuple[str, ...]
    size: Floats
    graded: Floats
    weight: Floats
    weight2: Floats
    value: Floats

    @property
    def effective(self) -> Floats:
        """Kish's effective number of grades: the number as many as graded when the
        weights are equal."""
        return self.weight**2 / self.weight2

    def merged(self, minimum: int = MIN_CELL) -> Cells:
        """The cells after merging those with fewer than `minimum` grades (`merge_groups`)."""
        groups = merge_groups(self.graded.tolist(), self.size.tolist(), minimum)

        def add(x: Floats) -> Floats:
            return np.array([x[g].sum() for g in groups])

        names = tuple("+".join(self.names[i] for i in g) for g in groups)
        parts = (self.size, self.graded, self.weight, self.weight2, self.value)
        return Cells(names, *map(add, parts))


def merge_groups(graded: Sequence[float], size: Sequence[float], minimum: int) -> list[list[int]]:
    """Which cells (indexes, in grade order) form each merged cell: a cell with fewer than
    `minimum` grades (and not all of its conversations graded) goes into a neighbour,
    the one with fewer grades, the shortest first, until none is short or one is left."""
    groups = [[i] for i in range(len(graded))]
    count, total = list(graded), list(size)

    def short(i: int) -> bool:
        return count[i] < min(minimum, total[i])

    while len(groups) > 1 and any(map(short, range(len(groups)))):
        i = min((i for i in range(len(groups)) if short(i)), key=lambda i: count[i])
        last = i == len(groups) - 1
        j = i + 1 if i == 0 or (not last and count[i + 1] < count[i - 1]) else i - 1
        lo, hi = min(i, j), max(i, j)
        groups[lo] += groups[hi]
        count[lo] += count[hi]
        total[lo] += total[hi]
        del groups[hi], count[hi], total[hi]
    return groups


def cell_order(cells: Sequence[str]) -> list[str]:
    present = set(cells)
    return [c for c in CELL_ORDER if c in present] + sorted(present - set(CELL_ORDER))


def merge_cells(
    cells: Sequence[str], labelled: npt.ArrayLike, minimum: int = MIN_CELL
) -> tuple[list[str], tuple[str, ...]]:
    """Each item's post-stratification cell after merging the cells with fewer than
    `minimum` labelled items into a neighbour in `CELL_ORDER` (a cell whose every item is
    labelled is known and stays), and the merged cells."""
    mask = np.asarray(labelled, dtype=bool)
    if mask.size != len(cells):
        raise ValueError(f"labelled: {mask.size} flags for {len(cells)} cells")
    order = cell_order(cells)
    index = {c: i for i, c in enumerate(order)}
    codes = np.fromiter((index[c] for c in cells), np.intp, len(cells))
    graded = np.bincount(codes[mask], minlength=len(order))
    size = np.bincount(codes, minlength=len(order))
    groups = merge_groups(graded.tolist(), size.tolist(), minimum)
    names = ["+".join(order[i] for i in g) for g in groups]
    name_of = {order[i]: names[j] for j, g in enumerate(groups) for i in g}
    return [name_of[c] for c in cells], tuple(names)


def cell_sums(cells: Sequence[str], human: Floats, weights: Floats | None = None) -> Cells:
    """The cells (in grade order) of items with people's values `human` (NaN where
    nobody graded) and design weights (None: a uniform sample)."""
    order = cell_order(cells)
    index = {c: i for i, c in enumerate(order)}
    codes = np.fromiter((index[c] for c in cells), np.intp, len(cells))
    graded = ~np.isnan(human)
    w = np.ones(human.size) if weights is None else np.asarray(weights, dtype=float)
    if w.size != human.size or (w[graded] <= 0).any() or np.isnan(w[graded]).any():
        raise ValueError("weights: one per item, positive where people graded it")
    k = len(order)
    g, wg = codes[graded], w[graded]
    return Cells(
        names=tuple(order),
        size=np.bincount(codes, minlength=k).astype(float),
        graded=np.bincount(g, minlength=k).astype(float),
        weight=np.bincount(g, weights=wg, minlength=k).astype(float),
        weight2=np.bincount(g, weights=wg * wg, minlength=k).astype(float),
        value=np.bincount(g, weights=wg * human[graded], minlength=k).astype(float),
    )


def interval(c: Cells, z: float) -> tuple[float, float, float]:
    """(estimate, low, high) of merged cells, every one graded."""
    estimate, low, high = intervals([c], z)
    return float(estimate[0]), float(low[0]), float(high[0])


def intervals(many: Sequence[Cells], z: float) -> tuple[Floats, Floats, Floats]:
    """`interval` of each of many merged cells at once (those with as many cells in one
    batch): estimates, lows, highs."""
    out = np.zeros((3, len(many)))
    by_count: dict[int, list[int]] = {}
    for i, c in enumerate(many):
        by_count.setdefault(len(c.names), []).append(i)
    for rows in by_count.values():
        size = np.array([many[i].size for i in rows])
        n_eff = np.array([many[i].effective for i in rows])
        rate = np.array([many[i].value / many[i].weight for i in rows])
        big_n = size.sum(-1)
        found = stratified_score(size / big_n[:, None], n_eff, rate * n_eff, big_n, z)
        out[:, rows] = np.array(found)
    return out[0], out[1], out[2]


def humans_only(c: Cells, z: float) -> tuple[float, float, float]:
    """People's (design-weighted) share of what they graded, with Wilson's interval at
    the effective number of grades: the comparison without the judge."""
    weight, weight2, value = c.weight.sum(), c.weight2.sum(), c.value.sum()
    n_eff = weight * weight / weight2
    share = value / weight
    estimate, low, high = stratified_score([1.0], [n_eff], [share * n_eff], 1.0, z, corrected=False)
    return float(estimate), float(low), float(high)


def corrected_rate(
    cells: Sequence[str],
    judge: npt.ArrayLike,
    human: npt.ArrayLike,
    triggered: npt.ArrayLike | None = None,
    *,
    weights: npt.ArrayLike | None = None,
    alpha: float = 0.05,
    min_labelled: int = MIN_LABELLED,
    min_cell: int | None = None,
) -> Corrected | None:
    """The corrected rate of one kind (failing, say) of one criterion over N conversations.

    `cells[i]`: the judge's grade of conversation i (or "notTriggered"); `judge[i]`: 1 when
    that grade is the kind counted, else 0; `human[i]`: people's value (1 / 0, or a share
    when several graded it), NaN where nobody did; `triggered[i]`, for a mechanism with a
    precondition only: the share of its graders who found it applied (NaN where nobody
    graded it); `weights[i]`: the inverse of conversation i's chance of being graded in
    a stratified sample (None: uniform). `min_cell`: the grades a cell needs before it
    is merged (default `MIN_CELL`; for a ratio `MIN_RATIO_CELL`). None when people
    graded fewer than `min_labelled` conversations (or, for a mechanism, found it
    applied in none of them).
    """
    f = np.asarray(judge, dtype=float)
    y = np.asarray(human, dtype=float)
    if not f.size == y.size == len(cells):
        raise ValueError(f"cells, judge, human: {len(cells)}, {f.size}, {y.size} items")
    w = None if weights is None else np.asarray(weights, dtype=float)
    graded = ~np.isnan(y)
    n = int(graded.sum())
    if n < min_labelled:
        return None
    z = two_sided_z(alpha)
    judged = np.array([c != NOT_TRIGGERED for c in cells])
    k_judge, n_judge = round(float(f[judged].sum())), int(judged.sum())
    judge_low, judge_high = wilson(k_judge, n_judge)
    if triggered is None:
        sums = cell_sums(cells, y, w)
        merged = sums.merged(MIN_CELL if min_cell is None else min_cell)
        estimate, low, high = interval(merged, z)
        humans, humans_low, humans_high = humans_only(sums, z)
        names = merged.names
    else:
        t = np.asarray(triggered, dtype=float)
        if t.size != f.size or not np.array_equal(np.isnan(t), ~graded):
            raise ValueError("triggered: one value per item, NaN exactly where human is")
        minimum = MIN_RATIO_CELL if min_cell is None else min_cell
        strata, names = merge_cells(cells, graded, minimum)
        stratified = ratio(strata, y, t, z, w)
        alone = ratio(["all"] * f.size, y, t, z, w)
        if stratified is None or alone is None:
            return None
        (estimate, low, high), (humans, humans_low, humans_high) = stratified, alone
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
        cells=names,
        ratio=triggered is not None,
    )


def ratio(
    strata: Sequence[str], y: Floats, t: Floats, z: float, weights: Floats | None = None
) -> tuple[float, float, float] | None:
    """The post-stratified ratio mean(y) / mean(t) over all items, from the items with a
    value (the others NaN), with its delta-method interval: (estimate, low, high); None
    when no graded item has t > 0. Every stratum must hold a graded item. `weights`:
    design weights (None: a uniform sample), each stratum's means then Hajek's."""
    keys = {s: i for i, s in enumerate(dict.fromkeys(strata))}
    codes = np.fromiter((keys[s] for s in strata), np.intp, len(strata))
    k, big_n = len(keys), len(strata)
    graded = ~np.isnan(y)
    cg = codes[graded]
    wg = np.ones(int(graded.sum())) if weights is None else np.asarray(weights)[graded]
    n_h = np.bincount(cg, minlength=k)
    if (n_h == 0).any():
        raise ValueError("ratio: a stratum without a graded item")
    sw = np.bincount(cg, weights=wg, minlength=k)
    n_eff = sw * sw / np.bincount(cg, weights=wg * wg, minlength=k)
    w = np.bincount(codes, minlength=k) / big_n
    ybar = np.bincount(cg, weights=wg * y[graded], minlength=k) / sw
    tbar = np.bincount(cg, weights=wg * t[graded], minlength=k) / sw
    denominator = float(w @ tbar)
    if denominator <= 0:
        return None
    r = float(w @ ybar) / denominator
    u = y[graded] - r * t[graded]
    ubar = ybar - r * tbar  # w @ ubar is 0 by construction
    dev = u - ubar[cg]
    s2 = np.divide(
        np.bincount(cg, weights=wg * dev * dev, minlength=k) / sw * n_h,
        n_h - 1,
        out=np.full(k, 0.25),  # a lone grade: the most a value in [0, 1] can vary
        where=n_h >= 2,
    )
    variance = (float((w * w) @ (s2 / n_eff)) + float(w @ (ubar * ubar)) / big_n) / denominator**2
    r = _clip(r)
    # the Wilson interval at the effective sample size (the number of binomial draws with
    # this variance), as survey estimates of a share do (Korn & Graubard 1998, with
    # Clopper-Pearson's): a normal interval misses low at a few failing conversations
    n_eff_all = r * (1 - r) / variance if variance > 0 and 0 < r < 1 else float(t[graded].sum())
    low, high = wilson_share(r, max(n_eff_all, 1e-9), z)
    return r, low, high


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))
