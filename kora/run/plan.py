"""`kora plan`: the calls a run will make, how many the call store already holds, and the
cost of the rest.

The plan walks the run's shard jobs exactly as the jobs and the prefetch do (kora.run.broker.walk,
each stage's own units and work), with models that never send anything: a paid model
answers only what the call store holds, the offline mock answers as it would in the run
(it is free and deterministic), and nothing is written. So for a run whose calls are all
stored or offline, the plan's count is the run's count, call for call. Where a call is not
stored, the rest of that unit, and every unit it would hand on, is counted at its nominal
number of calls (`Stage.nominal`). Costs use the tokens per call seen in earlier runs'
status files when there are any, else typical figures for each kind of call.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kora.benchmarks.base import Benchmark
from kora.benchmarks.templates import prompts_from
from kora.errors import ConfigError
from kora.llm.base import Request, Response
from kora.llm.money.bill import BillWriter
from kora.llm.money.budget import OVERHEAD_TOKENS, Unit, measure, most
from kora.llm.money.usage import Counts, Usage
from kora.llm.store.cache import CallCache
from kora.llm.store.packs import Packs
from kora.run.broker.walk import UNKNOWN, Walk
from kora.run.jobs.context import JobContext, Pool, RunSettings
from kora.run.stages.base import Job, role_models
from kora.run.stages.registry import STAGES
from kora.run.transport.jobspec import JobSpec
from kora.run.workflow.gather_inputs import result_stages
from kora.run.workflow.pipeline import Pipeline

# (input tokens, output tokens) per call of each kind when nothing better is known
TYPICAL_TOKENS = {
    "seeds": (1500, 2500),
    "expand": (1800, 1400),
    "validate": (2600, 300),
    "first_message": (900, 60),
    "child": (1600, 60),
    "target": (900, 350),
    "judge_safety": (2600, 350),
    "judge_behavior": (2400, 450),
    "judge_mechanisms": (3200, 1200),
}


TOKENS = ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")


class NotStored(Exception):
    """The call store has no answer for a call a paid model would have to make."""


class StoreOnly:
    """A provider that answers only what the call store already holds."""

    name = "store-only"

    async def generate(self, request: Request) -> Response:
        raise NotStored()

    async def aclose(self) -> None:
        return None


class PlanStore(CallCache):
    """The call store, read as it is; what the plan's offline calls answer is kept in
    memory only, so a later identical call finds it as the run's would."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.memory: dict[str, Response] = {}
        self.stored = 0  # answers found in the store
        self.repeated = 0  # answers of an identical call made earlier in the plan

    def get(self, key: str) -> Response | None:
        if key in self.memory:
            self.repeated += 1
            return self.memory[key]
        hit = super().get(key)
        if hit is not None:
            self.stored += 1
        return hit

    @classmethod
    def as_now(cls, root: Path) -> PlanStore:
        """The store as it is now, whatever a run stores in it later (kora.llm.store.packs)."""
        store = cls(root)
        store._packs = Packs(root)  # its own reader, not the one the process shares
        store._packs.freeze()
        return store

    def put(self, key: str, response: Response) -> None:
        self.memory[key] = response

    def put_rejected(self, key: str, response: Response) -> None:
        return None  # the plan writes nothing


@dataclass
class StageCount:
    items: int = 0
    calls: int = 0
    stored: int = 0  # answered from the call store
    repeated: int = 0  # answered by an identical call made earlier in the run

    @property
    def to_pay(self) -> int:
        return max(self.calls - self.stored - self.repeated, 0)


@dataclass
class PlanReport:
    stages: dict[str, StageCount] = field(default_factory=lambda: defaultdict(StageCount))
    # every call of the walk by model and kind (the jobs share it)
    usage: Usage = field(default_factory=Usage)
    # the offline models' answers, played through: their bill, as the run will write it
    # (summed in memory)
    bill: BillWriter = field(default_factory=lambda: BillWriter(None, "plan"))

    @property
    def calls(self) -> int:
        return sum(c.calls for c in self.stages.values())

    @property
    def played(self) -> dict[tuple[str, str], Counts]:
        """The calls the offline models answered in the walk (not from the store), by
        model and kind: what the run will pay for them, exactly."""
        return dict(self.bill.sums)


@dataclass
class Planner:
    """Counts each unit's calls as the walk visits it (one unit at a time)."""

    store: PlanStore
    report: PlanReport = field(default_factory=PlanReport)

    async def visit(self, job: Job, unit: Any) -> Any:
        count = self.report.stages[job.stage.name]
        count.items += 1
        if not job.replayable:  # a chat service's replies are not stored
            count.calls += job.stage.nominal(job, unit)
            return UNKNOWN
        calls = job.ctx.usage.totals()["calls"]
        stored, repeated = self.store.stored, self.store.repeated
        try:
            with prompts_from(job.prompts_dir):
                result = await job.stage.work(job, unit)
        except NotStored:
            result = UNKNOWN
        except ConfigError:
            raise  # the run would stop on it: the plan says it instead of a count
        except Exception:
            result = None  # a unit the run would record as failed
        made = job.ctx.usage.totals()["calls"] - calls
        count.calls += max(made, job.stage.nominal(job, unit)) if result is UNKNOWN else made
        count.stored += self.store.stored - stored
        count.repeated += self.store.repeated - repeated
        return result

    def unknown(self, job: Job, count: int) -> None:
        c = self.report.stages[job.stage.name]
        c.items += count
        c.calls += count * job.stage.nominal(job, None)


def plan_pool(plan: Pipeline, store: PlanStore | None, bill: BillWriter) -> tuple[Pool, PlanStore]:
    """Models that send nothing: the offline ones answer (written in `bill`, in memory),
    the others from the store."""
    store = store or PlanStore(plan.workdir / plan.config.cache_dir)
    fixed = {name: StoreOnly() for name, m in plan.config.models.items() if not m.kind.offline}
    pool = Pool(plan.workdir, fixed=fixed, store=store, sends=False, bill_kept=bill)  # type: ignore[arg-type]
    return pool, store


# The walk plays each unit's work through, and the work logs as it would in the run (a
# scenario the validator rejects, a fallback taken): the run's jobs say those things;
# from the plan they would be stray lines inside its answer (or the run's progress). A
# context variable, so a walk in one thread leaves another thread's logs alone.
_WALKING: ContextVar[bool] = ContextVar("kora_plan_walking", default=False)


class _NotFromTheWalk(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _WALKING.get()


for _name in ("kora", "kora.llm"):
    logging.getLogger(_name).addFilter(_NotFromTheWalk())


async def count_jobs(
    plan: Pipeline, specs: Iterable[JobSpec], store: PlanStore | None = None
) -> PlanReport:
    """The calls of these shard jobs (their specs), walked as the run walks them (`store`:
    the call store as the walk reads it)."""
    walking = _WALKING.set(True)  # this task's context and the tasks it starts
    report = PlanReport()
    pool, store = plan_pool(plan, store, report.bill)
    planner = Planner(store, report)

    def make(spec: JobSpec) -> Job:
        ctx = JobContext(pool, RunSettings(**spec.settings), usage=planner.report.usage)
        return STAGES[spec.rule].job(spec, ctx)

    walk = Walk(planner, make, concurrent=False).add(specs)
    try:
        await walk.run()
    finally:
        await pool.aclose()
        _WALKING.reset(walking)
    return planner.report


def target_jobs(plan: Pipeline, targets: list[str]) -> list[JobSpec]:
    """Every shard job behind these targets' results (result_stages), a cell's seeds once."""
    out = []
    stages = {t: result_stages(plan, t) for t in targets}
    shared = [s for s in ("seeds", "scenarios") if any(s in st for st in stages.values())]
    for cell in plan.cells():
        risk, age, motivation = cell.split("/")
        wc = {"risk": risk, "age": age, "motivation": motivation}
        out += [plan.job_spec(s, wc) for s in shared]
        for t in targets:
            out += [plan.job_spec(s, {**wc, "target": t}) for s in stages[t] if s not in shared]
    return out


async def plan_calls(plan: Pipeline, targets: list[str]) -> PlanReport:
    return await count_jobs(plan, target_jobs(plan, targets))


# how a kind's tokens a call are known (`Share.how`, as `kora plan` says it; PLAYED and
# STORED name the model whose answers they are)
PLAYED = "{}'s own answers, played as the run will play them"
STORED = "{}'s answers of its kinds of call this workspace has paid for (`kora usage`)"
TYPICAL = "the benchmark's expected length for its kinds of call (none paid for here yet)"


def tokens_per_call(store: Path) -> dict[tuple[str, str], Counts]:
    """The mean tokens of a call by model and kind, of the answers the workspace's bill
    holds (`store`: the call store, which the bill is beside): a model's are never
    another's (the mock's placeholder answers are short)."""
    from kora.llm.money.bill import bill_dir, charges

    acc: dict[tuple[str, str], Counts] = defaultdict(Counts)
    for charge in charges(bill_dir(store)):
        acc[charge.model, charge.stage] += charge.counts
    return {key: c * (1 / c.calls) for key, c in acc.items()}


@dataclass
class Share:
    """Calls of one kind still to pay, and what they are expected to cost (`expected`:
    their tokens and, at the prices known, their dollars) and at most (`worst`: every
    answer as long as its model's max_tokens)."""

    stage: str
    kind: str
    how: str  # PLAYED, STORED or TYPICAL
    calls: float
    expected: Counts
    worst: Counts
    unpriced: frozenset[str] = frozenset()  # paid models among them with no `price`


def dollars(shares: list[Share], figure: str = "expected") -> str:
    """The dollars of these shares (`expected` or `worst`); `*`: the priced part only."""
    total = sum(getattr(s, figure).cost for s in shares)
    return f"${total:,.2f}" + ("*" if unpriced_models(shares) else "")


def unpriced_models(shares: list[Share]) -> list[str]:
    """The paid models with no `price` among these shares'."""
    return sorted(set().union(*(s.unpriced for s in shares)))


def still_to_pay(
    shares: list[Share], unit: Unit, paid: Mapping[str, Counts] | None = None
) -> tuple[float, float]:
    """What the calls still to pay are expected to cost in `unit`, and the worst case of
    the dearest one (the room a budget must leave for the last call in flight). `paid`:
    what a run under way has paid by kind of call; a kind it has paid for is counted at
    what its calls have cost so far, for the calls of it still to come, and a kind not
    begun at the plan's figure times what the kinds begun cost against theirs."""
    by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    room = 0.0
    for s in shares:
        by[s.kind][0] += s.calls
        by[s.kind][1] += measure(unit, s.expected)
        if s.calls:
            room = max(room, measure(unit, s.worst) / s.calls)
    rest = cost = thought = 0.0  # the kinds begun: what they cost, what the plan thought
    for kind, (calls, expected) in by.items():
        got = (paid or {}).get(kind)
        if got is not None and got.calls and calls:
            rest += max(calls - got.calls, 0) * measure(unit, got) / got.calls
            cost, thought = cost + measure(unit, got), thought + got.calls * expected / calls
    unbegun = sum(e for k, (_, e) in by.items() if not (paid or {}).get(k, Counts()).calls)
    return rest + unbegun * (cost / thought if thought else 1.0), room


def estimate(
    cfg: Any, report: PlanReport, targets: list[str], workdir: Path, benchmark: Benchmark
) -> list[Share]:
    """What a plan's calls still to pay cost, by stage and kind of call: the calls the
    offline models answered in the walk at their own answers' tokens; the others (a paid
    model's, not stored) at the tokens a call the bill has seen of their kind, else the
    typical figures, spread over the stage's kinds by their share of its calls."""
    tokens = tokens_per_call(workdir / cfg.cache_dir)
    stage_of = {kind: name for name, st in STAGES.items() for kind in st.calls(benchmark)}

    def make(stage: str, kind: str, how: str, m: str, calls: float, one: Counts) -> Share:
        """`calls` calls of `kind` to model `m`, each like `one`."""
        model = cfg.models[m]
        # the most a call can cost as the budget holds room for it (kora.llm.money.budget): its
        # prompt at two characters a token, where English runs near four
        tin = one.input_tokens + one.cache_write_tokens + one.cache_read_tokens
        out = model.max_tokens or 4000  # the client's default
        worst = most(round(2 * tin) + OVERHEAD_TOKENS, out, model.cost_price)
        unpriced = frozenset([m] if model.cost_price is None and model.kind.billed else [])
        return Share(stage, kind, how, calls, one * calls, worst * calls, unpriced)

    out = [
        make(stage_of[kind], kind, PLAYED.format(m), m, c.calls, c * (1 / c.calls))
        for (m, kind), c in report.played.items()
        if kind in stage_of
    ]
    for stage, count in report.stages.items():
        rest = count.to_pay - sum(s.calls for s in out if s.stage == stage)
        for kind, (role, share) in STAGES[stage].calls(benchmark).items() if rest > 0 else ():
            # a fallback chain's later models answer only what the first cannot: priced
            # at the first; a judge's or a target's calls spread over them all
            if role == "target":
                models = [m for t in targets for m in role_models(cfg, role, t)]
            elif role == "judges":
                models = role_models(cfg, role)
            else:
                models = role_models(cfg, role)[:1]
            i, o = TYPICAL_TOKENS.get(kind, (1500, 500))  # a new stage's kind: neither
            for m in models:
                model = cfg.models[m]
                seen = tokens.get((m, kind))
                typical = seen or Counts(calls=1, input_tokens=i, output_tokens=o)
                how = STORED.format(m) if seen else TYPICAL
                tin, tout, tw, tr = (round(getattr(typical, f)) for f in TOKENS)
                answer = Response("", tin, tout, cache_write_tokens=tw, cache_read_tokens=tr)
                one = Counts.paid(
                    answer, model.batch_cost_price if model.batch else model.cost_price
                )
                out.append(make(stage, kind, how, m, rest * share / len(models), one))
    return out
