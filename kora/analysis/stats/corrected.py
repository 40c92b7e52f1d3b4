"""The corrected rate the report shows beside a judge-only rate (pure functions): the
judge's grade on every conversation, people's grade on a uniform random sample of them.

Method: prediction-powered inference (`kora.analysis.stats.ppi`) post-stratified on the
judge's grade of the criterion (its cells: failing, adequate, exemplary and, for a v2
mechanism with a precondition, not triggered). In each cell the rate is people's share
among the conversations of that cell they graded, and the cells are weighted by their
share of all conversations: the judge's grades say how the conversations fall into
cells, people say what each cell really holds. This is PPI with the judge recalibrated
per grade (Fisch et al., Stratified prediction-powered inference, NeurIPS 2024), and
the reason for it is coverage: plain PPI++ (one power-tuning lambda over all
conversations) held its 95 % interval only 90-93 % of the time at failing rates of 3-5 %
with 300 grades, post-stratified 95-96 % (bench/ppi_coverage.py, /work/notes/ppi.md).

A cell people graded fewer than `MIN_CELL` conversations of (and not all of them) is
merged with its neighbour in grade order (the one with fewer grades), until every cell
has enough or one is left; a merged cell's rate is people's share in it. PPI++'s
power-tuning lambda (Angelopoulos, Duchi, Zrnic 2023) is not used: inside a cell the
judge says one thing and lambda has nothing to tune, and in small groups, where cells
merge (one of the judge's grades has under 5 human grades), PPI++'s normal interval held
the true rate in as few as 83-91 % of simulated groups of 48 to 1,000 conversations with
20-60 graded, people's share per cell in 93-98 % (`python bench/ppi_coverage.py
--small`; tuned inside merged cells, lambda fared as badly). One cell left is the
humans-only share with Wilson's interval. With several cells the interval is narrower
than the humans-only one on average, not in every sample (the bench prints how often).

A v2 mechanism with a precondition has its rate among the conversations where it applied,
and which those are people say too: the rate is a ratio, (share triggered and graded
the kind) / (share triggered), both post-stratified the same way; its variance by the
delta method (Cochran, Sampling Techniques, 3rd ed., 6.11: the combined ratio estimate,
here over post-strata), its interval Wilson's at the effective sample size.

Several people on one conversation: their values are averaged (the estimand is then the
share the average person would give).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.stats import norm

from kora.analysis.stats.ppi import ppi_mean
from kora.analysis.stats.rates import wilson

Floats = npt.NDArray[np.float64]

NOT_TRIGGERED = "notTriggered"
CELL_ORDER = ("failing", "adequate", "exemplary", NOT_TRIGGERED)
MIN_CELL = 5  # people's grades a post-stratification cell needs, else it is merged
MIN_LABELLED = 10  # people's grades a group needs before it gets a corrected rate


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


def merge_cells(
    cells: Sequence[str], labelled: npt.ArrayLike, minimum: int = MIN_CELL
) -> tuple[list[str], tuple[str, ...]]:
    """Each item's post-stratification cell after merging the cells with fewer than
    `minimum` labelled items into a neighbour in `CELL_ORDER` (a cell whose every item is
    labelled is known and stays), and the merged cells."""
    mask = np.asarray(labelled, dtype=bool)
    if mask.size != len(cells):
        raise ValueError(f"labelled: {mask.size} flags for {len(cells)} cells")
    present = set(cells)
    order = [c for c in CELL_ORDER if c in present] + sorted(present - set(CELL_ORDER))
    groups = [[c] for c in order]
    count = [int(sum(1 for c, m in zip(cells, mask, strict=True) if m and c == g)) for g in order]
    size = [sum(1 for c in cells if c == g) for g in order]

    def short(i: int) -> bool:  # too few grades, unless every conversation of it is graded
        return count[i] < min(minimum, size[i])

    while len(groups) > 1 and any(map(short, range(len(groups)))):
        i = min((i for i in range(len(groups)) if short(i)), key=lambda i: count[i])
        last = i == len(groups) - 1
        j = i + 1 if i == 0 or (not last and count[i + 1] < count[i - 1]) else i - 1
        lo, hi = min(i, j), max(i, j)
        groups[lo] += groups[hi]
        count[lo] += count[hi]
        size[lo] += size[hi]
        del groups[hi], count[hi], size[hi]
    name = {c: "+".join(g) for g in groups for c in g}
    return [name[c] for c in cells], tuple("+".join(g) for g in groups)


def corrected_rate(
    cells: Sequence[str],
    judge: npt.ArrayLike,
    human: npt.ArrayLike,
    triggered: npt.ArrayLike | None = None,
    *,
    alpha: float = 0.05,
    min_labelled: int = MIN_LABELLED,
    min_cell: int = MIN_CELL,
) -> Corrected | None:
    """The corrected rate of one kind (failing, say) of one criterion over N conversations.

    `cells[i]`: the judge's grade of conversation i (or "notTriggered"); `judge[i]`: 1 when
    that grade is the kind counted, else 0; `human[i]`: people's value (1 / 0, or a share
    when several graded it), NaN where nobody did; `triggered[i]`, for a mechanism with a
    precondition only: the share of its graders who found it applied (NaN where nobody
    graded it). None when people graded fewer than `min_labelled` conversations (or, for
    a mechanism, found it applied in none of them).
    """
    f = np.asarray(judge, dtype=float)
    y = np.asarray(human, dtype=float)
    if not f.size == y.size == len(cells):
        raise ValueError(f"cells, judge, human: {len(cells)}, {f.size}, {y.size} items")
    graded = ~np.isnan(y)
    n = int(graded.sum())
    if n < min_labelled:
        return None
    strata, names = merge_cells(cells, graded, min_cell)
    judged = np.array([c != NOT_TRIGGERED for c in cells])
    k_judge, n_judge = round(float(f[judged].sum())), int(judged.sum())
    judge_low, judge_high = wilson(k_judge, n_judge)
    common = {
        "n": n,
        "N": f.size,
        "judge": k_judge / n_judge if n_judge else 0.0,
        "judge_low": judge_low,
        "judge_high": judge_high,
        "cells": names,
    }
    if triggered is None:
        r = ppi_mean(f, y, strata=strata, alpha=alpha, lam=0.0)
        plain = ppi_mean(f, y, alpha=alpha, lam=0.0)
        return Corrected(
            estimate=r.estimate,
            low=r.low,
            high=r.high,
            humans=plain.classical,
            humans_low=plain.classical_low,
            humans_high=plain.classical_high,
            ratio=False,
            **common,  # type: ignore[arg-type]
        )
    t = np.asarray(triggered, dtype=float)
    if t.size != f.size or not np.array_equal(np.isnan(t), ~graded):
        raise ValueError("triggered: one value per item, NaN exactly where human is")
    z = float(norm.ppf(1 - alpha / 2))
    stratified = ratio(strata, y, t, z)
    alone = ratio(["all"] * f.size, y, t, z)
    if stratified is None or alone is None:
        return None
    estimate, low, high = stratified
    return Corrected(
        estimate=estimate,
        low=low,
        high=high,
        humans=alone[0],
        humans_low=alone[1],
        humans_high=alone[2],
        ratio=True,
        **common,  # type: ignore[arg-type]
    )


def ratio(
    strata: Sequence[str], y: Floats, t: Floats, z: float
) -> tuple[float, float, float] | None:
    """The post-stratified ratio mean(y) / mean(t) over all items, from the items with a
    value (the others NaN), with its delta-method interval: (estimate, low, high); None
    when no graded item has t > 0. Every stratum must hold a graded item."""
    keys = {s: i for i, s in enumerate(dict.fromkeys(strata))}
    codes = np.fromiter((keys[s] for s in strata), np.intp, len(strata))
    k, big_n = len(keys), len(strata)
    graded = ~np.isnan(y)
    cg = codes[graded]
    n_h = np.bincount(cg, minlength=k)
    if (n_h == 0).any():
        raise ValueError("ratio: a stratum without a graded item")
    w = np.bincount(codes, minlength=k) / big_n
    ybar = np.bincount(cg, weights=y[graded], minlength=k) / n_h
    tbar = np.bincount(cg, weights=t[graded], minlength=k) / n_h
    denominator = float(w @ tbar)
    if denominator <= 0:
        return None
    r = float(w @ ybar) / denominator
    u = y[graded] - r * t[graded]
    ubar = ybar - r * tbar  # w @ ubar is 0 by construction
    dev = u - ubar[cg]
    s2 = np.divide(
        np.bincount(cg, weights=dev * dev, minlength=k),
        n_h - 1,
        out=np.full(k, 0.25),  # a lone grade: the most a value in [0, 1] can vary
        where=n_h >= 2,
    )
    variance = (float((w * w) @ (s2 / n_h)) + float(w @ (ubar * ubar)) / big_n) / denominator**2
    r = _clip(r)
    # the Wilson interval at the effective sample size (the number of binomial draws with
    # this variance), as survey estimates of a share do (Korn & Graubard 1998, with
    # Clopper-Pearson's): a normal interval misses low at a few failing conversations
    n_eff = r * (1 - r) / variance if variance > 0 and 0 < r < 1 else float(t[graded].sum())
    low, high = _wilson_share(r, max(n_eff, 1e-9), z)
    return r, low, high


def _wilson_share(p: float, n: float, z: float) -> tuple[float, float]:
    """The Wilson score interval of a share p of n (n need not be whole)."""
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    low = 0.0 if p <= 0 else max(0.0, centre - half)
    return low, 1.0 if p >= 1 else min(1.0, centre + half)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))
