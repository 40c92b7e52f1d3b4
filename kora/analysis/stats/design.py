"""How people's grades are spread for the corrected rates, and how many it takes (pure
functions, for `kora annotate` and bench/ppi_coverage.py).

`--design stratified` draws the conversations the judge graded failing on safety more
often than the others: there the judge's errors move the rate most, as a share near 1/2
varies most. The share of grades each stratum gets is Neyman's allocation, n_h in
proportion to W_h S_h (W_h: the stratum's share of the conversations, S_h the standard
deviation of people's grade in it), with S_h from a guess before anyone has graded: half
of what the judge calls failing is failing (S = 1/2, the most a grade can vary), and the
rest hold as large a share of failing conversations as the judge flags overall. People's
grades so far, where there are any, move the guess (two grades' worth of weight on it).
The allocation is fixed when the sample is drawn; within each stratum the graded
conversations are a uniform sample, so the corrected rate post-stratifies within the
strata (kora.analysis.stats.corrected). The judge's failing stratum gets at most half the
grades (or its share of the conversations, if that is larger).

The sample is one order of all conversations, as the uniform one: uniform draws up to
`uniform_start`, then the strata interleaved so that any first part of the order holds
each stratum's share of it (to one conversation), each stratum in its own random order.
Grading the first n of the order is then a uniform sample of n (n up to the start) or a
stratified one, whatever n people stop at.

`grades_for` says how many grades bring the corrected interval (normal approximation,
with the same guesses) to a width, and how many people's grades alone would need.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kora.analysis.stats.rates import Z95

FAILING = "failing"
OTHER = "other"
STRATA = (FAILING, OTHER)
PRIOR_GRADES = 2.0  # the weight of the guess against people's grades so far, in grades
MOST = 0.5  # the largest share of grades the judge's failing stratum gets
# a stratum the judge's failing grades make is drawn more often only once a uniform sample
# would have given it this many: before, its own few grades widen the interval more than
# they narrow it (bench/ppi_coverage.py at a failing rate of 0.02 with 30 to 100 grades),
# and two strata of 5 grades held a rate of 0.5 in 0.940 of samples, a uniform 10 in 0.948
# (the sample is taken as uniform up to there: kora.analysis.report.corrected)
START_GRADES = 5
# and only where the allocation gives it at least this many times its share of the
# conversations: below, the guess says stratifying gains next to nothing, and a sample of
# fixed parts is no better than a uniform one (a judge flagging half of everything, 100
# grades: 50 and 50 held a rate of 0.2 in 0.9405 of samples, a uniform 100 in 0.9455)
MORE = 1.1


@dataclass(frozen=True)
class Guess:
    """People's failing share guessed in each stratum (the judge's failing, the rest)."""

    failing: float
    other: float

    def sd(self, stratum: str) -> float:
        p = self.failing if stratum == FAILING else self.other
        return math.sqrt(p * (1 - p))


def guess(judge_share: float, seen: Mapping[str, tuple[float, int]] | None = None) -> Guess:
    """The guess for a judge that calls `judge_share` of the conversations failing, moved
    by people's grades so far: `seen[stratum]` = (failing grades, grades)."""
    prior = {FAILING: 0.5, OTHER: min(0.5, max(judge_share, 0.01))}
    out = {}
    for s in STRATA:
        k, n = (seen or {}).get(s, (0.0, 0))
        out[s] = (k + PRIOR_GRADES * prior[s]) / (n + PRIOR_GRADES)
    return Guess(out[FAILING], out[OTHER])


def allocation(judge_share: float, g: Guess | None = None) -> dict[str, float]:
    """The share of the grades each stratum gets (Neyman's, with the guess)."""
    if judge_share <= 0 or judge_share >= 1:
        return {FAILING: judge_share, OTHER: 1 - judge_share}
    g = g or guess(judge_share)
    a = judge_share * g.sd(FAILING)
    b = (1 - judge_share) * g.sd(OTHER)
    share = a / (a + b) if a + b > 0 else judge_share
    share = min(max(MOST, judge_share), share)
    return {FAILING: share, OTHER: 1 - share}


def uniform_start(judge_share: float, share: float) -> float:
    """How many of the order's first places are a uniform draw: until a uniform sample
    would have given the judge's failing stratum `START_GRADES` grades; all of them where
    its `share` of the grades is under `MORE` times its share of the conversations."""
    if share < MORE * judge_share:
        return math.inf
    return math.ceil(START_GRADES / judge_share) if judge_share > 0 else 0


def sequence(
    sizes: Mapping[str, int], shares: Mapping[str, float], n: int, rng: random.Random
) -> list[str]:
    """The strata of the order's first `n` places. The first `uniform_start` places are
    uniform draws (each to a stratum with a chance in proportion to what is left of it);
    after them each place goes to the stratum furthest behind its share of the places so
    far (ties: the order of `sizes`), skipping a stratum used up."""
    total = sum(sizes.values())
    start = uniform_start(sizes.get(FAILING, 0) / total, shares.get(FAILING, 0.0)) if total else 0
    taken = dict.fromkeys(sizes, 0)
    out = []
    for i in range(min(n, total)):
        open_ = [s for s in sizes if taken[s] < sizes[s]]
        if i < start:
            left = [sizes[s] - taken[s] for s in open_]
            s = rng.choices(open_, weights=left)[0]
        else:
            s = max(open_, key=lambda s: shares.get(s, 0.0) * (i + 1) - taken[s])
        taken[s] += 1
        out.append(s)
    return out


def interleave(
    strata: Mapping[str, Sequence[str]], shares: Mapping[str, float], seed: int
) -> list[str]:
    """Every key of every stratum in one order (`sequence`), each stratum's keys in a
    random order: with `seed`, the same order every time."""
    rng = random.Random(seed)
    queues = {}
    for s, keys in strata.items():
        q = sorted(keys)
        rng.shuffle(q)
        queues[s] = q
    sizes = {s: len(q) for s, q in queues.items()}
    at = dict.fromkeys(queues, 0)
    out = []
    for s in sequence(sizes, shares, sum(sizes.values()), rng):
        out.append(queues[s][at[s]])
        at[s] += 1
    return out


def grades_for(
    width: float,
    judge_share: float,
    g: Guess,
    shares: Mapping[str, float] | None = None,
) -> tuple[int, int]:
    """(grades the corrected rate needs, grades people's alone need) for a 95 % interval
    of `width` on the safety failing rate, with the guessed rates per stratum and the
    grades shared as `shares` (None: uniformly, each stratum its share of conversations);
    `width` as `kora annotate --width` checks it."""
    w = {FAILING: judge_share, OTHER: 1 - judge_share}
    a = shares or w
    per_grade = sum(w[s] ** 2 * g.sd(s) ** 2 / a[s] for s in STRATA if w[s] > 0 and a.get(s, 0) > 0)
    rate = judge_share * g.failing + (1 - judge_share) * g.other
    half = width / 2
    corrected = math.ceil(Z95 * Z95 * per_grade / (half * half))
    alone = math.ceil(Z95 * Z95 * rate * (1 - rate) / (half * half))
    return max(corrected, 1), max(alone, 1)
