"""`kora plan [TARGET...]`: the calls a run still needs, how many the call store already
holds, and what the rest costs (kora.run.plan)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from kora.commands.common import configfile_option, given_values, named_targets
from kora.run.plan import (
    PlanReport,
    Share,
    StageCount,
    dollars,
    estimate,
    plan_calls,
    still_to_pay,
    target_jobs,
    unpriced_models,
)
from kora.run.preflight import models_for_jobs
from kora.run.stages import ORDER
from kora.run.workflow.pipeline import Pipeline


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    targets = named_targets(args, args.targets)
    plan = Pipeline.load(args.configfile, workdir, given=given_values(args))
    cfg = plan.config
    targets = targets or list(cfg.targets)
    from kora.llm.lifecycle import lifecycle_notes

    used = models_for_jobs(cfg, [(stage, {"target": t}) for t in targets for stage in ORDER])
    for note in lifecycle_notes(cfg.models, used):
        print(f"kora: warning: {note}", file=sys.stderr)
    report = asyncio.run(plan_calls(plan, targets))
    shares = estimate(cfg, report, targets, workdir, plan.benchmark)
    cells, shards = len(plan.cells()), len(target_jobs(plan, targets))
    # a shard is one cell's file of one stage: what the run's progress line counts
    print(
        f"plan for {', '.join(targets)}: {cells} cell{'s' if cells != 1 else ''} of the grid "
        f"(risk x age range x motivation), {shards} shards"
    )
    print("\n".join(_table(report, shares)))
    print("\n".join(_how_estimated(shares)))
    if cfg.budget is not None:
        print(against_budget(plan, shares))
    return 0


def _table(report: PlanReport, shares: list[Share]) -> list[str]:
    """A row a stage and the total: its calls, what the store answers, what is paid and
    what that costs, expected and at worst."""
    head = f"{'stage':<14}{'items':>8}{'calls':>9}{'stored':>9}{'repeated':>10}{'to pay':>9}"
    lines = [f"{head}{'expected':>11}{'worst case':>12}"]
    for stage in [*ORDER, "total"]:
        total = stage == "total"
        rows = list(report.stages.values()) if total else [report.stages.get(stage, StageCount())]
        c = StageCount(
            *(sum(getattr(r, f) for r in rows) for f in ("items", "calls", "stored", "repeated"))
        )
        mine = shares if total else [s for s in shares if s.stage == stage]
        lines.append(
            f"{stage:<14}{'' if total else c.items:>8}{c.calls:>9}{c.stored:>9}{c.repeated:>10}"
            f"{c.to_pay:>9}{dollars(mine, 'expected'):>11}{dollars(mine, 'worst'):>12}"
        )
    lines.append(
        "stored: answered from the call store by an earlier run; repeated: the same "
        "question asked twice in this run, answered the second time from the store"
    )
    return lines


def _how_estimated(shares: list[Share]) -> list[str]:
    """Where the expected and worst figures come from, and what they leave out."""
    said: dict[str, list[str]] = {}
    for stage in ORDER:
        if mine := [s for s in shares if s.stage == stage and s.calls]:
            out = sum(s.expected.output_tokens for s in mine) / sum(s.calls for s in mine)
            how = "; ".join(dict.fromkeys(s.how for s in mine))
            said.setdefault(how, []).append(f"{stage} {out:,.0f}")
    lines = []
    if said:  # none when no call is to pay
        lines.append("expected: output tokens a call by stage, and where the figures come from:")
    lines += [f"  {', '.join(stages)}: {how}" for how, stages in said.items()]
    lines.append(
        "worst case: every answer as long as its model's max_tokens allows, every prompt "
        "counted generously (the room a budget holds for a call)"
    )
    if unpriced := unpriced_models(shares):
        lines.append(
            f"* the priced part only: {', '.join(unpriced)} {'has' if len(unpriced) == 1 else 'have'} "
            f"no `price` ({sum(s.calls for s in shares if s.unpriced):,.0f} of the calls "
            "to pay are left out; set `price: {input: ..., output: ...}` to count them)"
        )
    if saved := sum(s.expected.cache_saved for s in shares):
        lines.append(
            f"prompt caching: the estimate is ${saved:,.2f} lower than without it "
            "(at the share of input the provider's cache served in earlier runs)"
        )
    return lines


def against_budget(plan: Pipeline, shares: list[Share]) -> str:
    """The estimate beside the config's budget and what the workspace's bill holds."""
    from kora.config.checks import unpriced_for_budget
    from kora.llm.money.bill import bill_dir, total
    from kora.llm.money.budget import amount, counting_since, measure, suggest

    b = plan.config.budget
    assert b is not None
    store = plan.workdir / plan.config.cache_dir
    since = counting_since(store, b.since_epoch, start=False)
    billed = measure(b.unit, total(bill_dir(store), since=since))
    need, room = still_to_pay(shares, b.unit)
    line = f"budget {amount(b.unit, b.limit)}: {amount(b.unit, billed)} billed against it so far"
    if unpriced := unpriced_for_budget(plan.config, unpriced_models(shares)):
        return f"{line}; the run is refused, as it says: {unpriced}"
    if not room:
        return line + "; this plan pays for no call, so the budget does not stop it"
    left = b.limit - billed - need
    if left >= 0:
        return line + f"; this plan's estimate {amount(b.unit, need)} leaves {amount(b.unit, left)}"
    return (
        line + f"; this plan's estimate {amount(b.unit, need)} is {amount(b.unit, -left)} over "
        "it: the run will stop at the budget, its results unfinished. To see it through: "
        f"--config 'budget={suggest(b.unit, billed + need + room, b.since)}'"
    )
