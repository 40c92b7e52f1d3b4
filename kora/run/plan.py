"""`kora plan`: the calls a run still needs, how many are already stored, and the cost.

The plan replays each stage against the call store alone (a provider that answers only
from the cache): every stored call is found exactly where the pipeline would look for it;
where the replay stops at the first call not stored, the rest of that item is counted at
its nominal number of calls. Costs use the tokens per call seen in earlier runs' status
files when there are any, else typical figures for each stage.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kora.benchmarks.outcomes import Conversation
from kora.benchmarks.schemas import Scenario, ScenarioSeed
from kora.benchmarks.taxonomy import Shard, Taxonomy
from kora.config.schema import ModelRole, chain
from kora.errors import KoraError
from kora.io import read_jsonl
from kora.llm.base import Request, Response
from kora.llm.cache import CallCache
from kora.llm.chain import Asker, as_asker
from kora.llm.client import ModelClient
from kora.llm.targets import LLMTarget
from kora.llm.usage import Usage
from kora.run.pipeline import NOMINAL_CALLS, Pipeline
from kora.run.shards import check, status_of
from kora.run.stages.converse import conversation_calls, converse, turn_calls
from kora.run.stages.expand import ScenarioValidationError, expand_with_fallback
from kora.run.stages.seeds import generate_seeds

# (calls, input tokens, output tokens) per item when nothing better is known
TYPICAL_TOKENS = {
    "seeds": (1500, 2500),
    "expand": (1800, 1400),
    "validate": (2600, 300),
    "first_message": (900, 60),
    "child": (1600, 60),
    "target": (900, 350),
    "judge_safety": (2600, 350),
    "judge_behavior": (2400, 450),
}
STAGE_CALLS = {
    "seeds": [("seeds", 1.0)],
    "scenarios": [("expand", 1.0), ("validate", 1.0), ("first_message", 1.0)],
    "conversations": [("target", 0.6), ("child", 0.4)],
    "judgments": [("judge_safety", 0.5), ("judge_behavior", 0.5)],
}


def made_by(path: Path, models: dict[str, Any]) -> bool:
    """Whether the shard exists, is whole, and was made by these models (a run re-makes
    a shard another model made, so its calls are not stored for this config)."""
    try:
        check(path)
        status = orjson.loads(Path(status_of(path)).read_bytes())
    except (KoraError, OSError, orjson.JSONDecodeError):
        return False
    return bool(status.get("imported")) or status.get("models") == models


class NotStored(Exception):
    pass


class StoreOnly:
    """A provider that answers only what the call store already holds."""

    name = "store-only"

    async def generate(self, request: Request) -> Response:
        raise NotStored()

    async def aclose(self) -> None:
        return None


@dataclass
class StageCount:
    calls: int = 0
    stored: int = 0
    items: int = 0


@dataclass
class PlanReport:
    stages: dict[str, StageCount] = field(default_factory=lambda: defaultdict(StageCount))


@dataclass
class StoreOnlyRun:
    """The models of a run answering only from the call store (nothing is sent)."""

    plan: Pipeline
    usage: Usage = field(default_factory=Usage)

    @property
    def taxonomy(self) -> Taxonomy:
        return self.plan.taxonomy

    def client(self, name: str) -> ModelClient:
        cache = CallCache(self.plan.workdir / self.plan.config.cache_dir)
        config = self.plan.config.models[name]
        return ModelClient(name, config, cache=cache, usage=self.usage, provider=StoreOnly())

    def asker(self, role: ModelRole) -> Asker:
        """A role's model, a fallback chain replaying each member's stored answers."""
        return as_asker([self.client(n) for n in chain(role)])

    def target(self, target: str) -> LLMTarget | None:
        """The target as an LLM (replayed from the store); None for a chat endpoint, whose
        replies are not stored, or an imported target."""
        model = self.plan.config.targets[target].model
        if model is None or self.plan.config.models[model].is_service:
            return None
        return LLMTarget(self.client(model))


async def _replay(rt: StoreOnlyRun, coro: Any) -> tuple[Any, int]:
    before = rt.usage.totals().cached
    try:
        result = await coro
    except (NotStored, ScenarioValidationError, Exception):
        result = None
    return result, rt.usage.totals().cached - before


async def plan_calls(plan: Pipeline, targets: list[str]) -> PlanReport:
    rt = StoreOnlyRun(plan)
    cfg = plan.config
    report = PlanReport()
    continued = [t for t in targets if cfg.targets[t].continued]
    made = [t for t in targets if t not in continued]
    for cell in plan.cells():
        if made:  # only recordings to carry on need no seeds, no scenarios
            await _plan_cell(rt, report, cell, made)
        for target in continued:
            await _plan_continued(rt, report, target, cell)
    return report


async def _plan_cell(rt: StoreOnlyRun, report: PlanReport, cell: str, targets: list[str]) -> None:
    """A cell's seeds, scenarios, and the conversations and judgments of `targets` on
    them (targets whose conversations are made from the scenarios)."""
    plan = rt.plan
    workdir = plan.workdir
    cfg = plan.config
    st = report.stages
    shard = Shard.of_cell(plan.taxonomy, cell)
    # seeds
    seeds: list[ScenarioSeed] = []
    scen_file = workdir / plan.layout.scenarios(cell)
    seed_file = workdir / plan.layout.seeds(cell)
    scenarios: list[Scenario] | None = None
    # a shard counts as made only when what it was made from is current too: new
    # seeds re-make the scenarios (as Snakemake does), new scenarios the conversations
    seeds_current = made_by(seed_file, cfg.stage_models("seeds"))
    if plan.imported or (seeds_current and made_by(scen_file, cfg.stage_models("scenarios"))):
        scenarios = read_jsonl(scen_file, Scenario)
    scenarios_current = scenarios is not None
    if not plan.imported and scenarios is None:
        if seeds_current:
            seeds = read_jsonl(seed_file, ScenarioSeed)
            st["seeds"].calls += 1
            st["seeds"].stored += 1
        else:
            got, hits = await _replay(
                rt,
                generate_seeds(
                    shard,
                    rt.taxonomy,
                    plan.benchmark,
                    rt.asker(cfg.seed_model),
                    cfg.grid.seeds_per_task,
                ),
            )
            st["seeds"].calls += 1
            st["seeds"].stored += min(hits, 1)
            seeds = got or []
        n_seeds = len(seeds) if seeds else cfg.grid.seeds_per_task
        st["seeds"].items += 1
        scenarios = []
        for seed in seeds:
            got, hits = await _replay(
                rt,
                expand_with_fallback(
                    seed,
                    rt.taxonomy,
                    plan.benchmark,
                    [rt.client(n) for n in chain(cfg.expand_model)],
                    rt.asker(cfg.user_model),
                ),
            )
            st["scenarios"].calls += max(NOMINAL_CALLS["scenarios"], hits)
            st["scenarios"].stored += hits
            if got is not None:
                scenarios.append(got)
        missing = n_seeds - len(seeds)
        st["scenarios"].calls += missing * NOMINAL_CALLS["scenarios"]
        st["scenarios"].items += n_seeds
        # scenarios not yet known are counted as one per seed
        unknown = n_seeds - len(scenarios)
    else:
        unknown = 0
        if not plan.imported and scenarios is not None:
            # a finished expansion shard: its calls were all made
            st["seeds"].items += 1
            st["seeds"].calls += 1
            st["seeds"].stored += 1
            st["scenarios"].items += len(scenarios)
            st["scenarios"].calls += NOMINAL_CALLS["scenarios"] * len(scenarios)
            st["scenarios"].stored += NOMINAL_CALLS["scenarios"] * len(scenarios)
    scenarios = scenarios or []
    for target in targets:
        prompts = cfg.target_prompts(target)
        tgt = rt.target(target)
        conv_file = workdir / plan.layout.conversations(target, cell)
        known_convs: dict[str, Conversation] = {}
        if scenarios_current and made_by(conv_file, cfg.stage_models("conversations", target)):
            known_convs = {c.key: c for c in read_jsonl(conv_file, Conversation) if c.error is None}
        convs: list[Conversation] = []
        for scenario in scenarios:
            for prompt in prompts:
                from kora.benchmarks.testkeys import TestKey

                key = str(TestKey.of(scenario, prompt))
                st["conversations"].items += 1
                st["conversations"].calls += conversation_calls(rt.taxonomy, scenario)
                if key in known_convs:
                    st["conversations"].stored += conversation_calls(rt.taxonomy, scenario)
                    convs.append(known_convs[key])
                    continue
                if tgt is not None:
                    got, hits = await _replay(
                        rt,
                        converse(
                            scenario,
                            prompt,
                            target,
                            tgt,
                            rt.asker(cfg.user_model),
                            rt.taxonomy,
                        ),
                    )
                    st["conversations"].stored += hits
                    if got is not None:
                        convs.append(got)
        n_unknown_tests = unknown * len(prompts) + (len(scenarios) * len(prompts) - len(convs))
        st["conversations"].items += unknown * len(prompts)
        # a scenario not made yet: its risk's length (v2: up to 8 turns), no flavor's
        per_test = turn_calls(rt.taxonomy.risks[shard.risk_id][1].turns())
        st["conversations"].calls += unknown * len(prompts) * per_test
        await _plan_judgments(rt, report, convs, n_unknown_tests)


async def _plan_judgments(
    rt: StoreOnlyRun, report: PlanReport, convs: list[Conversation], unknown: int
) -> None:
    """The judge calls of known conversations (stored or not) and of `unknown` more."""
    st = report.stages
    judges = rt.plan.config.judges
    bm = rt.plan.benchmark
    st["judgments"].items += len(convs) + unknown
    st["judgments"].calls += (len(convs) + unknown) * NOMINAL_CALLS["judgments"] * len(judges)
    for conv in convs:
        for j in judges:
            _, hits = await _replay(rt, bm.judge(conv, [rt.client(j)], rt.taxonomy))
            st["judgments"].stored += hits


async def _plan_continued(rt: StoreOnlyRun, report: PlanReport, target: str, cell: str) -> None:
    """A continued target's cell: its recordings, each carried on (the turns it lacks)."""
    cfg = rt.plan.config
    st = report.stages
    recorded = rt.plan.recordings(target, cell)
    tgt = rt.target(target)
    convs: list[Conversation] = []
    for r in recorded:
        st["conversations"].items += 1
        st["conversations"].calls += conversation_calls(
            rt.taxonomy, r.scenario, len(r.messages) // 2
        )
        if tgt is None:
            continue
        got, hits = await _replay(
            rt,
            converse(r.scenario, r.prompt, target, tgt, rt.asker(cfg.user_model), rt.taxonomy,
                     r.messages),
        )  # fmt: skip
        st["conversations"].stored += hits
        if got is not None:
            convs.append(got)
    await _plan_judgments(rt, report, convs, len(recorded) - len(convs))


def tokens_per_call(workdir: Path) -> dict[str, tuple[float, float, float, float]]:
    """Mean paid tokens per call by stage, from earlier runs' status files: input,
    output, and the input written to and read from the provider's prompt cache."""
    import orjson

    acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0])
    for f in list((workdir / "data").rglob("*.status.json")) + list(
        (workdir / "results").rglob("*.status.json")
    ):
        try:
            s = orjson.loads(f.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        for u in s.get("usage", []):
            paid = u.get("calls", 0) - u.get("cached", 0) - u.get("failures", 0)
            write, read = u.get("cache_write_tokens", 0), u.get("cache_read_tokens", 0)
            if paid > 0 and u.get("input_tokens", 0) + write + read > 0:
                a = acc[u["stage"]]
                a[0] += paid
                a[1] += u["input_tokens"]
                a[2] += u["output_tokens"]
                a[3] += write
                a[4] += read
    out = {k: (float(v[0]), float(v[1]), 0.0, 0.0) for k, v in TYPICAL_TOKENS.items()}
    for stage, (n, tin, tout, tw, tr) in acc.items():
        out[stage] = (tin / n, tout / n, tw / n, tr / n)
    return out


def estimate_cost(
    raw_cfg: Any, report: PlanReport, targets: list[str], workdir: Path
) -> tuple[dict[str, float | None], float]:
    """Estimated cost by stage (None: a paid model without `price`), and what the
    provider's prompt cache saves of it at the share of cached tokens seen so far."""
    from kora.llm.base import Response
    from kora.llm.usage import Counts

    tokens = tokens_per_call(workdir)
    saved = 0.0
    model_for = {
        # a fallback chain's later models answer only what the first cannot: priced
        # at the first
        "seeds": chain(raw_cfg.seed_model)[:1],
        "scenarios": chain(raw_cfg.expand_model)[:1],
        "judgments": list(raw_cfg.judges),
    }
    out: dict[str, float | None] = {}
    for stage, count in report.stages.items():
        todo = max(count.calls - count.stored, 0)
        cost = 0.0
        for sub, share in STAGE_CALLS[stage]:
            if stage == "conversations":
                models = (
                    [raw_cfg.targets[t].model for t in targets]
                    if sub == "target"
                    else chain(raw_cfg.user_model)[:1]
                )
            elif stage == "scenarios" and sub == "first_message":
                models = chain(raw_cfg.user_model)[:1]
            else:
                models = model_for[stage]
            for m in models:
                price = raw_cfg.models[m].cost_price
                if price is None:
                    if not raw_cfg.models[m].kind.offline and not raw_cfg.models[m].is_service:
                        out[stage] = None
                    continue
                tin, tout, tw, tr = (round(x) for x in tokens[sub])
                # a model in batch mode pays half (Counts.paid reads it from the answer)
                meta = {"batch": "plan"} if raw_cfg.models[m].batch else {}
                one = Counts.paid(Response("", tin, tout, cache_write_tokens=tw,
                                           cache_read_tokens=tr, meta=meta), price)  # fmt: skip
                calls = todo * share / len(models)
                cost += calls * one.cost
                saved += calls * one.cache_saved
        if out.get(stage, 0.0) is not None:
            out[stage] = cost
    return out, saved
