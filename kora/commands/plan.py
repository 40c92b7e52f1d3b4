"""`kora plan [TARGET...]`: the calls a run still needs, how many the call store already
holds, and what the rest costs (kora.run.plan)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from kora.commands.common import configfile_option, split_overlays
from kora.config.schema import ROLES, chain
from kora.errors import ConfigError
from kora.run.pipeline import Pipeline
from kora.run.plan import StageCount, estimate_cost, plan_calls
from kora.run.stages import ORDER


def register(sub: Any) -> None:
    pl = sub.add_parser(
        "plan",
        help="calls each requested target needs, how many are stored, estimated cost",
        description="Count the calls a run of these targets needs, how many the call "
        "store already answers and what the rest would cost; with --detect, how large a "
        "run must be to see a given difference from another target.",
    )
    pl.add_argument("targets", nargs="*", help="target names (default: every target)")
    configfile_option(pl)
    from kora.commands.plan_detect import add_detect_arguments

    add_detect_arguments(pl)
    pl.set_defaults(func=print_plan)


def print_plan(args: argparse.Namespace) -> int:
    if getattr(args, "detect", None) is not None:
        from kora.commands.plan_detect import print_detection

        return print_detection(args)
    workdir = Path(".")
    overlays, targets = split_overlays(args.configfile, args.targets)
    plan = Pipeline.load(overlays, workdir)
    cfg = plan.config
    targets = targets or list(cfg.targets)
    for t in targets:
        if t not in plan.config.targets:
            raise ConfigError(
                f"unknown target {t!r}; the config defines: "
                + (", ".join(plan.config.targets) or "no targets")
            )
    from kora.llm.lifecycle import lifecycle_notes

    used = {n for role in ROLES for n in chain(getattr(cfg, role))} | set(cfg.judges)
    used |= {m for t in targets if (m := cfg.targets[t].model) is not None}
    for note in lifecycle_notes(cfg.models, used):
        print(f"kora: warning: {note}", file=sys.stderr)
    report = asyncio.run(plan_calls(plan, targets))
    costs, saved = estimate_cost(plan.config, report, targets, workdir, plan.benchmark)
    from kora.run.plan import target_jobs

    cells, shards = len(plan.cells()), len(target_jobs(plan, targets))
    # a shard is one cell's file of one stage: what the run's progress line counts
    print(
        f"plan for {', '.join(targets)}: {cells} cell{'s' if cells != 1 else ''} of the grid "
        f"(risk x age range x motivation), {shards} shards"
    )
    head = f"{'stage':<14}{'items':>8}{'calls':>9}{'stored':>9}{'repeated':>10}{'to pay':>9}"
    print(f"{head}{'est. cost':>12}")
    total_cost: float | None = 0.0
    for stage in ORDER:
        c = report.stages.get(stage, StageCount())
        cost = costs.get(stage, 0.0)
        cost_s = "no price" if cost is None else f"${cost:,.2f}"
        if cost is None:
            total_cost = None
        elif total_cost is not None:
            total_cost += cost
        print(
            f"{stage:<14}{c.items:>8}{c.calls:>9}{c.stored:>9}{c.repeated:>10}"
            f"{c.to_pay:>9}{cost_s:>12}"
        )
    total = StageCount(
        calls=report.calls,
        stored=sum(c.stored for c in report.stages.values()),
        repeated=sum(c.repeated for c in report.stages.values()),
    )
    total_s = (
        "unknown (set `price` on every paid model)" if total_cost is None else f"${total_cost:,.2f}"
    )
    print(
        f"{'total':<14}{'':>8}{total.calls:>9}{total.stored:>9}{total.repeated:>10}"
        f"{total.to_pay:>9}   {total_s}"
    )
    print(
        "stored: answered from the call store by an earlier run; repeated: the same "
        "question asked twice in this run, answered the second time from the store"
    )
    if saved:
        print(
            f"prompt caching: the estimate is ${saved:,.2f} lower than without it "
            "(at the share of input the provider's cache served in earlier runs)"
        )
    if cfg.budget is not None:
        print(against_budget(plan, report, total_cost))
    return 0


def against_budget(plan: Pipeline, report: Any, cost: float | None) -> str:
    """The estimate beside the config's budget and what the workspace's bill holds."""
    from kora.llm.bill import bill_dir, total
    from kora.llm.budget import amount, counting_since, measure
    from kora.run.plan import estimate_tokens

    b = plan.config.budget
    assert b is not None
    store = plan.workdir / plan.config.cache_dir
    since = counting_since(store, b.since_epoch, start=False)
    billed = measure(b.unit, total(bill_dir(store), since=since))
    need = cost if b.unit == "usd" else estimate_tokens(report, plan.workdir, store, plan.benchmark)
    line = f"budget {amount(b.unit, b.limit)}: {amount(b.unit, billed)} billed against it so far"
    if need is None:
        return line + "; this plan's cost is unknown (set `price` on every paid model)"
    left = b.limit - billed - need
    if left >= 0:
        return line + f"; this plan's estimate {amount(b.unit, need)} leaves {amount(b.unit, left)}"
    return (
        line + f"; this plan's estimate {amount(b.unit, need)} is {amount(b.unit, -left)} over "
        "it: the run will stop at the budget, its results unfinished"
    )
