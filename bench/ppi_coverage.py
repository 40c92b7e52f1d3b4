"""Coverage of the corrected (PPI++) rate's interval in a simulation with known truth.

    python bench/ppi_coverage.py                    # 1,000 runs of 12,000 conversations
    python bench/ppi_coverage.py --reps 200 --n 200 --size 3000
    python bench/ppi_coverage.py --rate 0.03        # a rare failing rate
    python bench/ppi_coverage.py --small            # groups the size of a risk's

Each run draws every conversation's true grade afresh (failing with probability
`--rate`), a judge that misses `--miss` of the failing ones and flags `--false-alarm` of
the others, and the conversations people grade: a uniform sample, and a sample
stratified by the judge's grade (half from each, as `kora annotate`'s round robin over
strata gives), analysed with its strata and, to show what that is worth, without them;
the uniform sample also post-stratified by the judge's grade (`strata` = the grade), and
"as the report": the uniform sample through `corrected_rate`, the function behind every
corrected rate of summary.json (post-strata on the judge's grade, small cells merged).
A last row is a KORA v2 mechanism with a precondition: its rate among the conversations
where it applied, which the judge also misjudges (the report's ratio estimate).
Printed per design: how often each 95 % interval holds the true rate, the mean widths,
and how often the corrected interval is no wider than the humans-only one. The
corrected interval must hold the rate at least 93 % of the time.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kora.analysis.stats.corrected import Corrected, corrected_rate
from kora.analysis.stats.ppi import ppi_mean

Bools = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Scenario:
    size: int = 12_000
    n: int = 300
    rate: float = 0.12
    miss: float = 0.30
    false_alarm: float = 0.03
    applies: float = 0.4  # a mechanism's precondition holds in this share of conversations
    trigger_miss: float = 0.15  # the judge says it does not apply where it does
    trigger_false: float = 0.05  # and that it applies where it does not


def populations(rng: np.random.Generator, reps: int, s: Scenario) -> tuple[Floats, Floats]:
    """(true grades, judge's grades) of `reps` runs: 1 = failing."""
    truth = rng.random((reps, s.size)) < s.rate
    u = rng.random((reps, s.size))
    judge = np.where(truth, u >= s.miss, u < s.false_alarm)
    return truth.astype(float), judge.astype(float)


def uniform_samples(rng: np.random.Generator, reps: int, s: Scenario) -> Bools:
    """Which conversations people grade: `n` of each run, all equally likely."""
    ranks = np.argsort(np.argsort(rng.random((reps, s.size)), axis=1), axis=1)
    return ranks < s.n


def stratified_samples(rng: np.random.Generator, judge: Floats, s: Scenario) -> Bools:
    """`n` / 2 conversations of each judge grade per run, uniform within the grade."""
    # sorting key + 2 x grade puts a run's grade-0 conversations first, each grade shuffled
    order = np.argsort(rng.random(judge.shape) + 2 * judge, axis=1)
    position = np.empty_like(order)
    np.put_along_axis(position, order, np.arange(judge.shape[1])[None, :], axis=1)
    zeros = (judge == 0).sum(axis=1, keepdims=True)
    rank = np.where(judge == 0, position, position - zeros)
    return rank < s.n // 2


def simulate(reps: int, s: Scenario, seed: int) -> dict[str, dict[str, float]]:
    """Per design: coverage and mean width of the corrected, humans-only and judge-only
    intervals, and the mean lambda."""
    rng = np.random.default_rng(seed)
    truth, judge = populations(rng, reps, s)
    uniform, stratified = uniform_samples(rng, reps, s), stratified_samples(rng, judge, s)
    designs = {
        "uniform": (uniform, False),
        "uniform, post-stratified by judge grade": (uniform, True),
        "by judge grade, strata": (stratified, True),
        "by judge grade, no strata": (stratified, False),
    }
    out = {
        "as the report (post-stratified, small cells merged)": _as_report(truth, judge, uniform, s)
    }
    for name, (sample, use_strata) in designs.items():
        hits = np.zeros((reps, 3), dtype=bool)
        widths = np.zeros((reps, 3))
        lams = np.zeros(reps)
        for i in range(reps):
            human = np.where(sample[i], truth[i], np.nan)
            r = ppi_mean(judge[i], human, strata=judge[i] if use_strata else None)
            for j, (low, high) in enumerate((r.ci, r.classical_ci, r.naive_ci)):
                hits[i, j] = low <= s.rate <= high
                widths[i, j] = high - low
            lams[i] = r.lam
        out[name] = _row(hits, widths, lams)
    return out


def _as_report(truth: Floats, judge: Floats, sample: Bools, s: Scenario) -> dict[str, float]:
    """`corrected_rate` as the report calls it, on the uniform sample."""
    reps = truth.shape[0]
    hits, widths, lams = np.zeros((reps, 3), dtype=bool), np.zeros((reps, 3)), np.zeros(reps)
    for i in range(reps):
        cells = np.where(judge[i] == 1, "failing", "adequate").tolist()
        r = corrected_rate(cells, judge[i], np.where(sample[i], truth[i], np.nan))
        assert r is not None
        _score(r, s.rate, hits[i], widths[i])
    return _row(hits, widths, lams)


def _score(r: Corrected, rate: float, hits: Bools, widths: Floats) -> None:
    """Whether each of a result's intervals (corrected, humans only, judge only) holds
    the true rate, and its width, into one repetition's row."""
    intervals = ((r.low, r.high), (r.humans_low, r.humans_high), (r.judge_low, r.judge_high))
    for j, (low, high) in enumerate(intervals):
        hits[j] = low <= rate <= high
        widths[j] = high - low


def _row(hits: Bools, widths: Floats, lams: Floats) -> dict[str, float]:
    cov, wid = hits.mean(axis=0), widths.mean(axis=0)
    return {
        "corrected": cov[0],
        "humans_only": cov[1],
        "judge_only": cov[2],
        "width_corrected": wid[0],
        "width_humans_only": wid[1],
        "width_judge_only": wid[2],
        "lam": float(lams.mean()),
        "narrower": float((widths[:, 0] <= widths[:, 1] + 1e-12).mean()),
    }


def simulate_mechanism(reps: int, s: Scenario, seed: int) -> dict[str, float]:
    """A v2 mechanism with a precondition: it applies in `applies` of the conversations,
    failing in `rate` of those; the judge misses `trigger_miss` of the conversations it
    applies to, finds it in `trigger_false` of the others, and grades as the safety judge
    (misses `miss` of the failing, flags `false_alarm` of the rest). The true rate is
    `rate`, among the conversations it applies to; people grade a uniform `n`."""
    rng = np.random.default_rng(seed)
    applies = rng.random((reps, s.size)) < s.applies
    failing = applies & (rng.random((reps, s.size)) < s.rate)
    u, v = rng.random((reps, s.size)), rng.random((reps, s.size))
    seen = np.where(applies, u >= s.trigger_miss, u < s.trigger_false)
    judge_fails = seen & np.where(failing, v >= s.miss, v < s.false_alarm)
    sample = uniform_samples(rng, reps, s)
    hits, widths, lams = np.zeros((reps, 3), dtype=bool), np.zeros((reps, 3)), np.zeros(reps)
    for i in range(reps):
        cells = np.where(~seen[i], "notTriggered", np.where(judge_fails[i], "failing", "adequate"))
        human = np.where(sample[i], failing[i].astype(float), np.nan)
        triggered = np.where(sample[i], applies[i].astype(float), np.nan)
        r = corrected_rate(cells.tolist(), judge_fails[i].astype(float), human, triggered)
        assert r is not None
        _score(r, s.rate, hits[i], widths[i])
    return _row(hits, widths, lams)


SMALL = ((48, 32), (120, 20), (400, 30), (1000, 60))


def small_groups(reps: int, seed: int) -> None:
    """The report's estimator in groups as small as a risk's or an age range's, where
    cells merge: against PPI++ (tuned lambda, no cells) and people's share alone."""
    print("| conversations | graded | true rate | coverage: as the report | PPI++ | humans only "
          "| mean width: as the report | PPI++ | humans only |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for size, n in SMALL:
        for rate in (0.12, 0.05):
            s = Scenario(size=size, n=n, rate=rate)
            rng = np.random.default_rng(seed)
            truth, judge = populations(rng, reps, s)
            sample = uniform_samples(rng, reps, s)
            hits, widths = np.zeros((reps, 3), dtype=bool), np.zeros((reps, 3))
            for i in range(reps):
                cells = np.where(judge[i] == 1, "failing", "adequate").tolist()
                y = np.where(sample[i], truth[i], np.nan)
                r = corrected_rate(cells, judge[i], y, min_labelled=1)
                assert r is not None
                plain = ppi_mean(judge[i], y)
                for j, (low, high) in enumerate(((r.low, r.high), plain.ci,
                                                 (r.humans_low, r.humans_high))):  # fmt: skip
                    hits[i, j] = low <= rate <= high
                    widths[i, j] = high - low
            cov, wid = hits.mean(axis=0), widths.mean(axis=0)
            print(f"| {size:,} | {n} | {rate} | {cov[0]:.3f} | {cov[1]:.3f} | {cov[2]:.3f} "
                  f"| {wid[0]:.3f} | {wid[1]:.3f} | {wid[2]:.3f} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description="Coverage of the PPI++ rate interval.")
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--size", type=int, default=Scenario.size, help="conversations a run")
    ap.add_argument("--n", type=int, default=Scenario.n, help="conversations people grade")
    ap.add_argument("--rate", type=float, default=Scenario.rate, help="true failing rate")
    ap.add_argument("--miss", type=float, default=Scenario.miss)
    ap.add_argument("--false-alarm", type=float, default=Scenario.false_alarm)
    ap.add_argument("--seed", type=int, default=20231)
    ap.add_argument("--small", action="store_true", help="groups of 48-1,000 conversations")
    args = ap.parse_args()
    if args.small:
        small_groups(args.reps, args.seed)
        return
    s = Scenario(args.size, args.n, args.rate, args.miss, args.false_alarm)
    started = time.perf_counter()
    rows = simulate(args.reps, s, args.seed)
    took = time.perf_counter() - started
    judge_rate = s.rate * (1 - s.miss) + (1 - s.rate) * s.false_alarm
    print(
        f"{args.reps} runs of {s.size:,} conversations, {s.n} graded by people; true failing "
        f"rate {s.rate}, judge misses {s.miss:.0%} and flags {s.false_alarm:.0%} of the "
        f"rest (judge-only rate {judge_rate:.4f}); seed {args.seed}; {took:.1f} s\n"
    )
    rows["v2 mechanism, rate among triggered (as the report)"] = simulate_mechanism(
        args.reps, s, args.seed + 1
    )
    took = time.perf_counter() - started
    print(f"({took:.1f} s with the mechanism's runs)\n")
    print("| sample, analysis | coverage: corrected | humans only | judge only (Wilson) "
          "| mean width: corrected | humans only | judge only | corrected no wider | mean lambda |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['corrected']:.3f} | {r['humans_only']:.3f} | {r['judge_only']:.3f}"
            f" | {r['width_corrected']:.4f} | {r['width_humans_only']:.4f}"
            f" | {r['width_judge_only']:.4f} | {r['narrower']:.3f} | {r['lam']:.3f} |"
        )
    checked = (
        "as the report (post-stratified, small cells merged)",
        "v2 mechanism, rate among triggered (as the report)",
        "uniform, post-stratified by judge grade",
        "by judge grade, strata",
    )
    low = [f"{k} {rows[k]['corrected']:.3f}" for k in checked if rows[k]["corrected"] < 0.93]
    if low:
        raise SystemExit(f"\nFAIL: corrected coverage under 0.93: {'; '.join(low)}")


if __name__ == "__main__":
    main()
