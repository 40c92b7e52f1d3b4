"""`kora plan TARGET --detect DELTA --against OTHER`: how many seeds per task (v1) or
`total_seeds` (v2) a run needs to detect a difference of DELTA in safety failing rate
between TARGET and OTHER with the power wanted at the level `kora compare-targets
--fail-if-worse` tests at, and what that run costs (kora.analysis.stats.sizing)."""

from __future__ import annotations

import argparse
import asyncio
import copy
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kora.analysis.stats.paired import ALPHA
from kora.analysis.stats.power import POWER
from kora.analysis.stats.sizing import Detection, Discordance, Unit
from kora.errors import ConfigError, InputError

if TYPE_CHECKING:
    from kora.benchmarks.schemas import PromptVariant
    from kora.config.schema import KoraConfig
    from kora.run.workflow.pipeline import Pipeline

MAX_SEEDS = {"seeds_per_task": 100, "total_seeds": 10_000}  # the config's limits


def add_detect_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("run size to detect a difference (--detect)")
    g.add_argument(
        "--detect",
        type=float,
        metavar="DELTA",
        help="difference in safety failing rate to detect, as a share (0.05: 5 points)",
    )
    g.add_argument(
        "--against", metavar="OTHER", help="the target (or results folder) to compare with"
    )
    g.add_argument("--power", type=float, default=POWER, help="power wanted (0.8)")
    g.add_argument("--alpha", type=float, default=ALPHA, help="significance level (0.05)")
    g.add_argument(
        "--overall",
        action="store_true",
        help="the gate tests the overall failing rate alone (no adjustment across cells)",
    )
    g.add_argument(
        "--discordance",
        type=float,
        help="share of paired tests where one target fails and the other not (default: "
        "from an earlier run of the two, else 0.2)",
    )


def _check(args: argparse.Namespace) -> None:
    if not 0 < args.detect < 1:
        raise InputError(f"--detect is a share in (0, 1) (0.05 for 5 points), got {args.detect}")
    if not args.against:
        raise InputError("--detect needs --against OTHER: the target to compare with")
    if not 0 < args.power < 1 or not 0 < args.alpha < 1:
        raise InputError("--power and --alpha must be between 0 and 1")
    if args.discordance is not None and not 0 < args.discordance <= 1:
        raise InputError(f"--discordance must be in (0, 1], got {args.discordance}")


def earlier_discordance(results: str, target: str, other: str) -> Discordance | None:
    """The two targets' discordance in an earlier run, from their judged tests."""
    from kora.analysis.records import judged, load_records
    from kora.analysis.stats.sizing import discordance
    from kora.commands.compare_targets import resolve_target

    try:
        pa, pb = resolve_target(target, results), resolve_target(other, results)
    except InputError:
        return None
    fa = {r.pair_key: r.failing for r in judged(load_records([pa]))}
    fb = {r.pair_key: r.failing for r in judged(load_records([pb]))}
    return discordance(fa, fb)


def run_cost(
    overlays: list[str], raw: dict[str, Any], targets: list[str], fresh: bool
) -> tuple[int, int, str]:
    """(calls, stored, cost) of the run with the grid in `raw` (kora.run.plan).

    `fresh`: a new seed count makes new seeds, so new scenarios, conversations and
    judgments: the run is counted from scratch, in an empty folder with the config's
    taxonomy, prompts and distribution files where they are (the tokens per call still
    come from this folder's earlier runs).
    """
    import tempfile

    import yaml

    from kora.config.schema import taxonomy_dir_of
    from kora.run.plan import dollars, estimate, plan_calls, unpriced_models
    from kora.run.workflow.pipeline import Pipeline

    with tempfile.TemporaryDirectory(prefix="kora-detect-") as tmp:
        workdir = Path(tmp) if fresh else Path(".")
        if fresh:
            raw = {**raw, "taxonomy_dir": str(Path(taxonomy_dir_of(raw)).resolve())}
            if isinstance(raw.get("prompts_dir"), str):
                raw["prompts_dir"] = str(Path(raw["prompts_dir"]).resolve())
            dist = raw["grid"].get("distribution")
            if isinstance(dist, str) and Path(dist).exists():
                raw["grid"] = {**raw["grid"], "distribution": str(Path(dist).resolve())}
            (workdir / "config.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
            overlays = []
        plan = Pipeline.load(overlays, workdir, values=raw)
        report = asyncio.run(plan_calls(plan, targets))
    shares = estimate(plan.config, report, targets, Path("."), plan.benchmark)
    stored = sum(c.stored for c in report.stages.values())
    unpriced = ", ".join(unpriced_models(shares))
    cost = dollars(shares) + (
        f" (* without the calls of {unpriced}: no `price`)" if unpriced else ""
    )
    return report.calls, stored, cost


def describe(d: Detection, disc: Discordance, target: str, other: str) -> list[str]:
    if disc.source == "earlier run":
        where = (
            f"{disc.discordant} of {disc.n} paired tests in the earlier run of the two "
            f"(95% interval {disc.low:.3f}-{disc.high:.3f})"
        )
    elif disc.source == "given":
        where = "as given (--discordance)"
    else:
        where = "assumed (no earlier run of the two; set it with --discordance)"
    raised = (
        f", raised to {d.psi:.3f}: a difference of {d.delta:g} needs at least that"
        if d.psi_raised
        else ""
    )
    level = (
        f"alpha {d.alpha:g}, the overall cell tested alone (--overall)"
        if d.cells == 1
        else f"alpha {d.alpha:g} / {d.cells} cells = {d.level:.3g}: Holm's first step across the "
        "failing family of `kora compare-targets` (a floor for the gate's power)"
    )
    return [
        f"to detect a difference of {100 * d.delta:g} points in safety failing rate between "
        f"{target} and {other} with {100 * d.target:g}% power:",
        f"  discordance (one fails, the other not): {disc.psi:.3f}, {where}{raised}",
        f"  level: {level}",
        f"  paired tests needed: {d.pairs_needed:,} (exact McNemar power "
        f"{100 * d.power_needed:.1f}%; Connor's normal approximation says {d.connor_pairs:,})",
        f"  {d.unit}: {d.seeds} -> {d.pairs:,} paired tests ({d.pairs_per_seed} per seed), "
        f"power {100 * d.power:.1f}%",
    ]


def print_detection(args: argparse.Namespace) -> int:
    """`kora plan TARGET --detect DELTA --against OTHER`."""
    from kora.analysis.stats.sizing import detect
    from kora.commands.common import given_values, named_targets
    from kora.run.workflow.pipeline import Pipeline

    _check(args)
    targets = named_targets(args, args.targets)
    if len(targets) != 1:
        raise InputError("--detect takes one TARGET (and --against OTHER)")
    target, other = targets[0], args.against
    plan = Pipeline.load(args.configfile, Path("."), given=given_values(args))
    unit, per_seed, cells = _design(args, plan, _shared_prompts(plan.config, target, other))
    disc = _discordance(args, plan.layout.results, target, other)
    at = partial(
        detect,
        args.detect,
        pairs_per_seed=per_seed,
        unit=unit,
        cells=cells,
        alpha=args.alpha,
        power=args.power,
        max_seeds=MAX_SEEDS[unit],
    )
    d = at(disc.psi)
    now = plan.config.grid.total_seeds if unit == "total_seeds" else plan.config.grid.seeds_per_task
    lines = describe(d, disc, target, other)
    lines[-1] += f"; the config has {now}"
    if disc.source == "earlier run" and disc.high is not None and disc.high > d.psi:
        worst = at(disc.high)
        lines.append(
            f"  at the top of the discordance's interval ({disc.high:.3f}): {unit} {worst.seeds}"
        )
    lines.append(
        "  (scenarios the validation rejects and tests that fail lower the paired tests: "
        "leave a margin)"
    )
    print("\n".join(lines))
    if d.too_many:
        print(
            f"that is more than {unit} allows ({d.max_seeds}): widen the grid (risks, age "
            "ranges, motivations) or detect a larger difference"
        )
        return 0
    _print_run_cost(args, plan.config, unit, d.seeds, now, [target, other])
    return 0


def _shared_prompts(cfg: KoraConfig, target: str, other: str) -> list[PromptVariant]:
    """The prompt variants both targets run (all of `target`'s where `other` is a folder)."""
    prompts = cfg.target_prompts(target)
    if other in cfg.targets:
        prompts = [p for p in prompts if p in cfg.target_prompts(other)]
    if not prompts:
        raise ConfigError(f"{target} and {other} run no prompt variant in common: nothing to pair")
    return prompts


def _design(
    args: argparse.Namespace, plan: Pipeline, prompts: list[PromptVariant]
) -> tuple[Unit, int, int]:
    """The grid's unit of size, the paired tests a seed makes, and the cells the gate
    adjusts across (1 with --overall)."""
    from kora.analysis.stats.cells import family_size

    cfg = plan.config
    risks = cfg.risks(plan.taxonomy)
    unit: Unit = "total_seeds" if cfg.grid.total_seeds is not None else "seeds_per_task"
    per_seed = (len(risks) if unit == "total_seeds" else len(plan.cells())) * len(prompts)
    if args.overall:
        return unit, per_seed, 1
    by_category: dict[str, list[str]] = {}
    for r in risks:
        by_category.setdefault(plan.taxonomy.category_of(r).id, []).append(r)
    criteria = ("safety", *plan.benchmark.criteria)
    return unit, per_seed, family_size(criteria, by_category, cfg.age_ranges(), prompts)


def _discordance(args: argparse.Namespace, results: str, target: str, other: str) -> Discordance:
    """The discordance given (--discordance), else an earlier run's, else the assumed."""
    from kora.analysis.stats.sizing import assumed

    if args.discordance is not None:
        return replace(assumed(args.discordance), source="given")
    return earlier_discordance(results, target, other) or assumed()


def _print_run_cost(
    args: argparse.Namespace,
    cfg: KoraConfig,
    unit: Unit,
    seeds: int,
    now: int | None,
    pair: list[str],
) -> None:
    """What the run of that size costs, both targets of the config in it."""
    from kora.commands.common import raw_config

    target, other = pair
    raw = copy.deepcopy(raw_config(args))
    raw.setdefault("grid", {})[unit] = seeds
    run = [target] + ([other] if other in cfg.targets else [])
    try:
        calls, stored, cost = run_cost(args.configfile, raw, run, fresh=seeds != now)
    except ConfigError as exc:
        print(f"that run does not fit this grid: {exc}")
        return
    fresh = " from scratch (new seeds: nothing stored is reused)" if seeds != now else ""
    print(
        f"that run{fresh} ({', '.join(run)}, {unit} {seeds}): {calls:,} calls, "
        f"{stored:,} stored, {calls - stored:,} to pay, est. cost {cost}"
    )
    if other not in cfg.targets:
        print(f"note: {other} is no target of this config: its tests must cover the same scenarios")
