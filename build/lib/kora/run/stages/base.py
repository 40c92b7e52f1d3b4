"""One description of each shard stage, read by everything that runs or counts its work.

A `Stage` says what its rule declares (inputs, output patterns, params, log), what its
units of work are (the items of a shard: seed calls, seeds, tests, conversations), the
calls one unit makes and what a unit yields for the next stage. From it:

- the rules take their inputs, outputs and params (kora.run.pipeline);
- a job reads its units from its input files and runs `work` on each (`Stage.run`);
- the run's prefetch and `kora plan` walk the same units from stage to stage
  (kora.run.walk): the prefetch to make their calls ahead of the jobs, the plan to count
  them against the call store.

A `Job` is one Snakemake job of a stage: its rule's declared files and params, validated,
and the context its calls go through.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from kora import benchmarks
from kora.benchmarks.base import Benchmark
from kora.benchmarks.schemas import AgeRange
from kora.benchmarks.taxonomy import Shard, Taxonomy
from kora.io import describe
from kora.run.context import JobContext
from kora.run.jobspec import JobSpec
from kora.run.layout import CELL, TARGET
from kora.run.shard_run import ShardJob, run_shard_job
from kora.run.shards import status_of

if TYPE_CHECKING:
    from kora.config.schema import KoraConfig
    from kora.run.layout import Layout


class Rules(Protocol):
    """What a stage's rule is made from: the run's config as kora.run.pipeline.Pipeline
    holds it (a protocol, so that the stages do not import the pipeline that lists them)."""

    config: KoraConfig

    @property
    def benchmark(self) -> Benchmark: ...
    @property
    def layout(self) -> Layout: ...
    def templates(self, stage: str) -> list[str]: ...
    def taxonomy_files(self) -> list[str]: ...
    def cell(self, wc: Any) -> dict[str, str]: ...
    def cell_of(self, wc: Mapping[str, str]) -> str: ...
    def retry_param(self, pattern: str) -> Callable[[Any], str]: ...
    def role_params(self, role: str) -> dict[str, Any] | list[dict[str, Any]]: ...
    def seeds_plan_params(self) -> dict[str, Any]: ...
    def judges_params(self) -> list[dict[str, Any]]: ...
    def target_model_params(self, target: str) -> dict[str, Any]: ...
    def conversation_source(self, target: str) -> str: ...
    def conversations_sources(self, wc: dict[str, str]) -> dict[str, str]: ...


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


# a role's model as a rule param (KoraConfig.role_params): one, or a fallback chain
RoleParams = dict[str, Any] | list[dict[str, Any]]

# the roles a stage's calls are made in: the config's role keys, its judges, the target
Role = str


def role_models(config: KoraConfig, role: Role, target: str | None = None) -> list[str]:
    """The models of a role in the order they are tried (a chain's), as the config names
    them; the target's model, none for recorded conversations."""
    from kora.config.schema import chain

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
    Snakemake re-run it when it must be made again (kora.run.shards)."""

    benchmark: str
    cell: Cell
    retry: str


@dataclass
class Job:
    """One job of a shard stage, as its rule declared it."""

    stage: Stage
    input: Any
    output: Any
    params: Any
    ctx: JobContext

    @cached_property
    def benchmark(self) -> Benchmark:
        return benchmarks.get(self.params.benchmark)

    @cached_property
    def taxonomy(self) -> Taxonomy:
        return self.ctx.pool.taxonomy(self.input.taxonomy, self.benchmark)

    @property
    def cell(self) -> str:
        return str(self.params.cell.path)

    @property
    def target(self) -> str | None:
        return getattr(self.params, "target", None)

    @property
    def prompts_dir(self) -> Path:
        return Path(self.input.prompts[0]).parent

    @cached_property
    def clients(self) -> Any:
        """The models its units call, made once per job (`Stage.clients`)."""
        return self.stage.clients(self)


class Stage(ABC):
    """A shard stage: its rule, its units and the calls they make."""

    name: ClassVar[str]
    # the stage whose results give this one's units, in the same cell (and target)
    feeds_on: ClassVar[str | None]
    input_model: ClassVar[type[Spec]]
    output_model: ClassVar[type[Spec]] = ShardOutput
    params_model: ClassVar[type[ShardParams]]

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

    def sources(self, pipeline: Rules, wc: dict[str, str]) -> dict[str, Any]:
        """The input files the job's units come from."""
        return {}

    def inputs(self, pipeline: Rules, wc: dict[str, str]) -> dict[str, Any]:
        """The input files of one job: its sources, the templates it renders, the taxonomy."""
        return {
            **self.sources(pipeline, wc),
            "prompts": pipeline.templates(self.name),
            "taxonomy": pipeline.taxonomy_files(),
        }

    @abstractmethod
    def model_params(self, pipeline: Rules) -> dict[str, Any]:
        """The params naming the models the stage calls, and what else changes its calls."""

    def params(self, pipeline: Rules) -> dict[str, Any]:
        """Params: values, or functions of the wildcards (as Snakemake takes them)."""
        return {
            "benchmark": pipeline.benchmark.name,
            "cell": pipeline.cell,
            **self.model_params(pipeline),
            "retry": pipeline.retry_param(self.data(pipeline)),
        }

    # whether its jobs are per target (conversations, judgments) or per cell only
    by_target: ClassVar[bool] = False
    # the params that differ from cell to cell of a job holding a risk's cells
    # (kora.run.groups); the others are the same for every cell
    per_cell: ClassVar[frozenset[str]] = frozenset({"cell", "retry"})

    # the kinds of call its units make (each call's `stage`, usage.json's kinds): the role
    # whose model makes it, and its share of the stage's calls (`kora plan`'s estimate)
    call_kinds: ClassVar[dict[str, tuple[Role, float]]]

    def calls(self, benchmark: Benchmark) -> dict[str, tuple[Role, float]]:
        """Its kinds of call under a benchmark version."""
        return self.call_kinds

    def models(self, config: KoraConfig, target: str | None = None) -> set[str]:
        """Every model its jobs (for `target`) call: the run's checks cover these."""
        roles = {role for role, _ in self.calls(benchmarks.get(config.benchmark)).values()}
        return {m for role in roles for m in role_models(config, role, target)}

    def log(self, pipeline: Rules) -> str:
        return pipeline.layout.log(self.name, *((TARGET,) if self.by_target else ()), CELL)

    # --- a job -------------------------------------------------------------------------

    def job(self, spec: JobSpec, ctx: JobContext) -> Job:
        try:
            return Job(
                self,
                self.input_model.model_validate(spec.input),
                self.output_model.model_validate(spec.output),
                self.params_model.model_validate(spec.params),
                ctx,
            )
        except ValidationError as exc:
            raise ValueError(
                f"rule {self.name}: its job spec does not match: {describe(exc)}"
            ) from None

    def clients(self, job: Job) -> Any:
        return None

    @abstractmethod
    def units(self, job: Job) -> list[Any]:
        """The job's units, from its input files."""

    def units_from(self, job: Job, result: Any) -> list[Any]:
        """The job's units that one result of the stage it feeds on gives."""
        return []

    @abstractmethod
    async def work(self, job: Job, unit: Any) -> Any:
        """One unit's calls and what they make."""

    @abstractmethod
    def nominal(self, job: Job, unit: Any) -> int:
        """The calls of one unit when every call is answered at the first try (`unit`
        None: a unit not known yet)."""

    def yields(self, job: Job, unit: Any) -> int:
        """How many results for the next stage a unit makes, when it is not known."""
        return 1

    def fanout(self, job: Job) -> int:
        """How many units of this stage one result of the stage it feeds on gives."""
        return 1

    @abstractmethod
    def label(self, job: Job, unit: Any) -> str:
        """A unit as its errors name it."""

    @abstractmethod
    def write(self, job: Job, shard: ShardJob, units: Sequence[Any], results: Sequence[Any]) -> int:
        """The shard's records and status, from each unit's result or error."""

    @abstractmethod
    def made_by(self, job: Job) -> dict[str, Any]:
        """The models that make the shard, by role (written in its status)."""

    def shard_name(self, job: Job) -> str:
        return f"{job.target}/{job.cell}" if self.by_target else job.cell

    async def run(self, job: Job) -> int:
        """The Snakemake job: every unit of the shard, then its records and status."""
        shard = ShardJob(
            self.name, self.shard_name(job), job.output.data, job.params.retry, self.made_by(job)
        )
        units = self.units(job)
        # the stage's own work and labels, bound to the job: the shard's run calls them
        # directly, not back through here
        work, label = partial(self.work, job), partial(self.label, job)
        results = await run_shard_job(shard, job.ctx, units, work, label=label)
        return self.write(job, shard, units, results)


def as_read(record: Any, model: type[Any]) -> Any:
    """A record as the next job reads it from the shard file its job writes (a round trip
    through JSON), so a call made ahead is byte for byte the one that job makes."""
    import orjson

    raw = record.shard_record() if hasattr(record, "shard_record") else record
    data = (
        raw.model_dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(raw, BaseModel)
        else raw
    )
    return model.model_validate(orjson.loads(orjson.dumps(data)))
