"""One description of each shard stage, read by everything that runs or counts its work.

A `Stage` says what its rule declares (inputs, output patterns, params, log), what its
units of work are (the items of a shard: seed calls, seeds, tests, conversations), the
calls one unit makes and what a unit yields for the next stage. From it:

- the rules take their inputs, outputs and params (kora.run.workflow.pipeline);
- a job reads its units from its input files and runs `work` on each (`Stage.run`);
- the run's prefetch and `kora plan` walk the same units from stage to stage
  (kora.run.broker.walk): the prefetch to make their calls ahead of the jobs, the plan to count
  them against the call store.

A `Job` is one Snakemake job of a stage: its rule's declared files and params, validated
(each stage's own models, declared once), and the context its calls go through.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, SkipValidation, ValidationError

from kora import benchmarks
from kora.benchmarks.base import Benchmark
from kora.benchmarks.layout import CELL, TARGET, Layout, status_of
from kora.benchmarks.schemas import AgeRange
from kora.benchmarks.taxonomy import Shard, Taxonomy
from kora.config.schema import KoraConfig, chain
from kora.io import describe, dumps
from kora.run.jobs.context import JobContext
from kora.run.jobs.shard_run import JobReport, ShardJob, run_shard_job
from kora.run.jobs.shards import retry_token
from kora.run.transport.jobspec import JobSpec


class Rules(Protocol):
    """What a stage's rule is made from: the run's config as kora.run.workflow.pipeline.Pipeline
    holds it (a protocol, so that the stages do not import the pipeline that lists them)."""

    config: KoraConfig

    @property
    def benchmark(self) -> Benchmark: ...
    @property
    def layout(self) -> Layout: ...
    def templates(self, stage: str) -> list[str]: ...
    def taxonomy_files(self) -> list[str]: ...
    def cell_of(self, wc: Mapping[str, str]) -> str: ...
    def seeds_plan_params(self) -> dict[str, Any]: ...
    def conversation_source(self, target: str) -> str: ...
    def conversations_sources(self, wc: dict[str, str]) -> dict[str, str]: ...


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


# a role's model as a rule param (`role_param`): one, or a fallback chain
RoleParams = dict[str, Any] | list[dict[str, Any]]


@dataclass(frozen=True)
class Role:
    """Declared on a param naming models (`Annotated[RoleParams, Role(...)]`): the config's
    role its models come from (a role key, `judges`, or `target`), its name in the shard's
    status, and the kinds of call its models make (each call's `stage`, usage.json's
    kinds), each with its share of the stage's calls (`kora plan`'s estimate)."""

    key: str
    made_by: str
    calls: Mapping[str, float] = field(default_factory=dict, hash=False)


def role_param(config: KoraConfig, role: str) -> object:
    """A role's models as a rule param: a model's params, a fallback chain's list, the
    judges' list; the target's model, a function of the wildcards."""
    if role == "target":
        return lambda wc: config.model_params(role_models(config, role, wc.target)[0])
    params = [config.model_params(m) for m in role_models(config, role)]
    return params if role == "judges" or len(params) > 1 else params[0]


def role_models(config: KoraConfig, role: str, target: str | None = None) -> list[str]:
    """The models of a role in the order they are tried (a chain's), as the config names
    them; the target's model, none for recorded conversations."""
    if role == "judges":
        return list(config.judges)
    if role == "target":
        model = config.targets[target].model if target is not None else None
        return [] if model is None else [model]
    return chain(getattr(config, role))


class Cell(Spec):
    """The grid cell of a shard (its wildcards, as a param)."""

    risk: str
    age: AgeRange
    motivation: str

    def shard(self, taxonomy: Taxonomy) -> Shard:
        return Shard(taxonomy.category_of(self.risk).id, self.risk, self.age, self.motivation)

    @property
    def path(self) -> str:
        return f"{self.risk}/{self.age}/{self.motivation}"


class Sources(Spec):
    """Input files every shard rule declares: the templates it renders, the taxonomy."""

    prompts: list[Path]
    taxonomy: list[Path]


class ShardOutput(Spec):
    data: Path
    status: Path


class ShardParams(Spec):
    """What every shard job is told: its version and its cell, and the token that makes
    Snakemake re-run it when it must be made again (kora.run.jobs.shards)."""

    benchmark: str
    cell: Cell
    retry: str


def cell_param(wc: Any) -> dict[str, str]:
    """The `cell` param: a job's grid cell from its wildcards."""
    return {"risk": wc.risk, "age": wc.age, "motivation": wc.motivation}


def retry_param(pattern: str) -> Callable[[Any], str]:
    """A shard rule's `retry` param: a function of the wildcards only, because Snakemake
    ignores params derived from output files when deciding what to re-run."""
    return lambda wc: retry_token(pattern.format(**dict(wc.items())))


class TargetParams(ShardParams):
    """What a job of one target (and cell) is told besides."""

    target: str


class Job(BaseModel):
    """One job of a shard stage, as its rule declared it (each stage's subclass narrows
    `input`, `output` and `params` to its own models)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    stage: SkipValidation[AnyStage]
    input: Sources
    output: ShardOutput
    params: ShardParams
    ctx: SkipValidation[JobContext]

    @cached_property
    def benchmark(self) -> Benchmark:
        return benchmarks.get(self.params.benchmark)

    @cached_property
    def taxonomy(self) -> Taxonomy:
        return self.ctx.pool.taxonomy(self.input.taxonomy, self.benchmark)

    @property
    def cell(self) -> str:
        return self.params.cell.path

    @property
    def target(self) -> str | None:
        return self.params.target if isinstance(self.params, TargetParams) else None

    @property
    def prompts_dir(self) -> Path:
        return Path(self.input.prompts[0]).parent

    @property
    def replayable(self) -> bool:
        """Whether its calls can be made ahead of it and replayed from the call store
        (kora.run.broker.prefetch, `kora plan`)."""
        return True


J = TypeVar("J", bound=Job)
U = TypeVar("U")  # a unit of work
R = TypeVar("R")  # what a unit makes
# each unit of a shard with what it made, or the error it met
Done = Sequence[tuple[U, R | BaseException]]


class Stage(ABC, Generic[J, U, R]):
    """A shard stage: its rule, its units and the calls they make."""

    name: ClassVar[str]
    # the stage whose results give this one's units, in the same cell (and target)
    feeds_on: ClassVar[str | None]
    # its jobs' own models: the files the rule declares, its params
    job_type: type[J]

    # --- what the rule declares --------------------------------------------------------

    @abstractmethod
    def data(self, pipeline: Rules) -> str:
        """The pattern of the shard's records (Snakemake wildcards left in)."""

    def outputs(self, pipeline: Rules) -> dict[str, str]:
        """A cell's output patterns (`files_of` its records' pattern)."""
        return self.files_of(self.data(pipeline))

    def files_of(self, data: str) -> dict[str, str]:
        """A shard's files by kind, from its records' path: the records, and the status
        file that describes them."""
        return {"data": data, "status": status_of(data)}

    def sources(self, pipeline: Rules, wc: dict[str, str]) -> dict[str, str]:
        """The input files the job's units come from."""
        return {}

    def inputs(self, pipeline: Rules, wc: dict[str, str]) -> dict[str, str | list[str]]:
        """The input files of one job: its sources, the templates it renders, the taxonomy."""
        return {
            **self.sources(pipeline, wc),
            "prompts": pipeline.templates(self.name),
            "taxonomy": pipeline.taxonomy_files(),
        }

    @cached_property
    def params_model(self) -> type[ShardParams]:
        model: type[ShardParams] = self.job_type.model_fields["params"].annotation  # type: ignore[assignment]
        return model

    @cached_property
    def roles(self) -> dict[str, Role]:
        """Its params that name models, by name: the role of each."""
        fields = self.params_model.model_fields.items()
        return {k: m for k, f in fields for m in f.metadata if isinstance(m, Role)}

    def own_params(self, pipeline: Rules) -> dict[str, object]:
        """Its params besides its roles' models and those every shard job has: what else
        changes its calls."""
        return {}

    def params(self, pipeline: Rules) -> dict[str, object]:
        """Params: values, or functions of the wildcards (as Snakemake takes them), in the
        order its params model declares them, the retry token last."""
        given = {
            "benchmark": pipeline.benchmark.name,
            "cell": cell_param,
            "target": lambda wc: wc.target,
            **{name: role_param(pipeline.config, role.key) for name, role in self.roles.items()},
            **self.own_params(pipeline),
        }
        declared = {k: given[k] for k in self.params_model.model_fields if k in given}
        return {**declared, "retry": retry_param(self.data(pipeline))}

    @property
    def by_target(self) -> bool:
        """Whether its jobs are per target (conversations, judgments) or per cell only."""
        return issubclass(self.params_model, TargetParams)

    # the params that differ from cell to cell of a job holding a risk's cells
    # (kora.run.workflow.risk_jobs); the others are the same for every cell
    per_cell: ClassVar[frozenset[str]] = frozenset({"cell", "retry"})

    def calls(self, benchmark: Benchmark) -> dict[str, tuple[str, float]]:
        """Its kinds of call under a benchmark version: the role whose models make each,
        and its share of the stage's calls."""
        roles = self.roles.values()
        return {kind: (r.key, share) for r in roles for kind, share in r.calls.items()}

    def models(self, config: KoraConfig, target: str | None = None) -> set[str]:
        """Every model its jobs (for `target`) call: the run's checks cover these."""
        return {m for r in self.roles.values() for m in role_models(config, r.key, target)}

    def log(self, pipeline: Rules) -> str:
        return pipeline.layout.log(self.name, *((TARGET,) if self.by_target else ()), CELL)

    # --- a job -------------------------------------------------------------------------

    def job(self, spec: JobSpec, ctx: JobContext) -> J:
        parts = {"input": spec.input, "output": spec.output, "params": spec.params}
        return declared(self.name, self.job_type, {"stage": self, **parts, "ctx": ctx})

    @abstractmethod
    def units(self, job: J) -> list[U]:
        """The job's units, from its input files."""

    def units_from(self, job: J, result: object) -> list[U]:
        """The job's units that one result of the stage it feeds on gives."""
        return []

    @abstractmethod
    async def work(self, job: J, unit: U) -> R:
        """One unit's calls and what they make."""

    @abstractmethod
    def nominal(self, job: J, unit: U | None) -> int:
        """The calls of one unit when every call is answered at the first try (`unit`
        None: a unit not known yet)."""

    def yields(self, job: J, unit: U | None) -> int:
        """How many results for the next stage a unit makes, when it is not known."""
        return 1

    def fanout(self, job: J) -> int:
        """How many units of this stage one result of the stage it feeds on gives."""
        return 1

    @abstractmethod
    def label(self, job: J, unit: U) -> str:
        """A unit as its errors name it."""

    @abstractmethod
    def write(self, job: J, shard: ShardJob, done: Done[U, R]) -> int:
        """The shard's records and status, from each unit's result or error."""

    def made_by(self, job: J) -> dict[str, object]:
        """The models that make the shard, by role (written in its status)."""
        return {role.made_by: getattr(job.params, name) for name, role in self.roles.items()}

    def shard_name(self, job: J) -> str:
        return f"{job.target}/{job.cell}" if self.by_target else job.cell

    async def run(self, job: J) -> int:
        """The Snakemake job: every unit of the shard, then its records and status."""
        report = JobReport(self.name, self.shard_name(job))
        shard = ShardJob(report, job.output.data, job.params.retry, self.made_by(job))
        units = self.units(job)
        # the stage's own work and labels, bound to the job: the shard's run calls them
        # directly, not back through here
        work, label = partial(self.work, job), partial(self.label, job)
        results = await run_shard_job(shard, job.ctx, units, work, label=label)
        return self.write(job, shard, list(zip(units, results, strict=True)))


# any stage, as the walk, the plan and the jobs' runner take them from the list of stages
AnyStage = Stage[Job, object, object]
M = TypeVar("M", bound=BaseModel)


def declared(rule: str, model: type[M], data: object) -> M:
    """What a rule declared (its job, or its inputs, outputs or params), validated."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"rule {rule}: its job spec does not match: {describe(exc)}") from None


def as_read(record: BaseModel, model: type[M]) -> M:
    """A record as the next job reads it from the shard file its job writes (its line, as
    kora.io.dumps writes it, read back), so a call made ahead is byte for byte the one that
    job makes."""
    line = dumps(record.shard_record() if hasattr(record, "shard_record") else record)
    return model.model_validate(orjson.loads(line))


Job.model_rebuild()
