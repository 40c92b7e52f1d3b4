"""`kora replay`: a result rebuilt from its bundle (kora.analysis.bundle), with no key and
no network, and checked against what was published.

The bundle's config, templates and taxonomy are laid out in an empty folder, and every
shard job behind the result runs again, stage after stage, exactly as a run's jobs do
(kora.run.broker.execute), except that every model answers from the bundle's answers and from
nothing else: a call the bundle cannot answer fails its item, naming the call's key, and
never leaves the machine. Then results.json, summary.json and the report are made from
the rebuilt shards by the same code as the run's results and report jobs.

What was taken as given is laid out as it is, not rebuilt: an import's scenarios or
conversations, recordings carried on, people's grades, and the conversations of a chat
service, whose replies are never stored (kora.llm.targets.EndpointTarget).

Then each rebuilt file is compared with the bundle's: identical, or every file and
answer that differs is named.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from kora import benchmarks
from kora.analysis.bundle import (
    ANSWERS,
    ANSWERS_INDEX,
    CARRIED,
    INDEX,
    PROMPTS,
    TAXONOMY,
    Bundle,
    BundleStore,
)
from kora.analysis.manifest import project_facts, sha256_bytes
from kora.analysis.results import rested_keys
from kora.benchmarks.layout import CACHE_DIR, MANIFEST, RESULTS, STATUS, status_of
from kora.benchmarks.templates import template_path
from kora.io import sha256_file
from kora.llm.base import ProviderError, Request, Response
from kora.llm.registry import kind_of
from kora.llm.store.cache import cache_key
from kora.run.broker.execute import execute
from kora.run.jobs.context import Pool
from kora.run.plan import target_jobs
from kora.run.stages import ORDER
from kora.run.transport.jobspec import JobSpec
from kora.run.workflow import gather_inputs
from kora.run.workflow.pipeline import Pipeline

log = logging.getLogger("kora")
# cells of one stage rebuilt side by side: enough to keep a core busy, few enough that
# the shards read at once stay small
CELLS_AT_ONCE = 32


class NotInBundle:
    """A model that answers nothing new: the bundle's store answers what it holds; a call
    it does not hold comes here, and gets the answer the run turned down for it (which
    the caller turns down again, and asks again, as in the run), or fails its item and is
    named."""

    def __init__(
        self, name: str, identity: dict[str, Any], bundle: Bundle, missing: dict[str, str]
    ) -> None:
        self.name = name
        self.label = f"model {name!r}"
        self.identity = identity
        self.bundle = bundle
        self.missing = missing

    async def generate(self, request: Request) -> Response:
        key = cache_key(self.identity, request)
        turned_down = self.bundle.rejected(key)
        if turned_down is not None:
            return turned_down
        self.missing[key] = self.name
        raise ProviderError(
            f"{self.label}: the bundle holds no answer to this call ({key})", retryable=False
        )

    async def aclose(self) -> None:
        return None


@dataclass
class Replay:
    """What a replay found."""

    seconds: float = 0.0
    changed_members: list[str] = field(default_factory=list)  # altered in the bundle
    changed_answers: list[str] = field(default_factory=list)  # keys
    answers_digest_ok: bool = True
    missing_answers: dict[str, str] = field(default_factory=dict)  # key -> model
    differing: list[str] = field(default_factory=list)  # rebuilt files that differ
    rebuilt_shards: int = 0
    checked: list[str] = field(default_factory=list)  # the result's files compared
    given: list[str] = field(default_factory=list)  # what was laid out, not rebuilt
    notes: list[str] = field(default_factory=list)
    failed_jobs: list[str] = field(default_factory=list)
    answer_of: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        return not (
            self.changed_members
            or self.changed_answers
            or not self.answers_digest_ok
            or self.missing_answers
            or self.differing
            or self.failed_jobs
        )


def _config_of(bundle: Bundle) -> dict[str, Any]:
    """The result's config, reading the bundle's templates, taxonomy and answers."""
    cfg = dict(bundle.manifest["config"]["effective"])
    cfg["prompts_dir"] = PROMPTS
    cfg["taxonomy_dir"] = TAXONOMY
    cfg["cache_dir"] = CACHE_DIR  # never read: the bundle's store answers
    cfg.pop("budget", None)  # nothing is paid
    return cfg


def _lay_out(bundle: Bundle, work: Path, names: list[str]) -> None:
    for name in names:
        data = bundle.read(name)
        if data is None:
            continue
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _rebuilt_stages(pipeline: Pipeline, target: str) -> list[str]:
    stages = gather_inputs.result_stages(pipeline, target)
    model = pipeline.config.targets[target].model
    if model is not None and kind_of(pipeline.config.models[model].provider).is_service:
        # a chat service's replies are not stored: its conversations are taken as given
        stages = [s for s in stages if s != "conversations"]
    return stages


async def _stage(specs: list[JobSpec], pool: Pool, found: Replay) -> None:
    slots = asyncio.Semaphore(CELLS_AT_ONCE)

    async def one(spec: JobSpec) -> None:
        async with slots:
            outcome = await execute(spec, pool, "a replay")
        if outcome.status:
            found.failed_jobs.append(
                f"{spec.rule} {spec.log[0] if spec.log else ''}: {outcome.message}"
            )

    await asyncio.gather(*(one(s) for s in specs))


def _gather_spec(pipeline: Pipeline, target: str, rule: str, work: Path) -> JobSpec:
    layout = pipeline.layout
    if rule == "results":
        inputs: dict[str, Any] = dict(gather_inputs.results_inputs(pipeline, target))
        output = {"results": layout.results_json(target), "usage": layout.usage_json(target)}
        params: dict[str, Any] = {
            "meta": gather_inputs.results_meta(pipeline, target),
            "places": pipeline.places,
            "retry": "",
        }
    else:
        inputs = gather_inputs.report_inputs(pipeline, target)
        output = {"html": layout.report_html(target), "summary": layout.summary_json(target)}
        params = {"target": target, "places": pipeline.places}
    logs = [str(work / layout.log("replay", rule, target))]
    return JobSpec.of(rule, inputs, output, params, logs, pipeline.raw_config)


async def _rebuild(bundle: Bundle, work: Path, found: Replay) -> None:
    target = bundle.target
    setup = _lay_out_setup(bundle, work)
    pipeline = Pipeline.load([], work)
    stages = _rebuilt_stages(pipeline, target)
    jobs = target_jobs(pipeline, [target])
    rebuilt = {o for spec in jobs if spec.rule in stages for o in _outputs(spec)}
    _lay_out_given(bundle, work, skip={*rebuilt, *setup, MANIFEST}, found=found)
    store = BundleStore(bundle)
    await _run(pipeline, [s for s in jobs if s.rule in stages], store, found)
    held = {
        k
        for k, (digest, rejected) in bundle.answer_keys().items()
        if digest != "-" and not rejected
    }
    unused = held - store.used
    if unused and not found.failed_jobs:
        found.notes.append(f"{len(unused)} answers of the bundle were not asked for")
    _compare_all(bundle, work, sorted(rebuilt), found)


def _lay_out_setup(bundle: Bundle, work: Path) -> list[str]:
    """The run's config, taxonomy and templates in `work`; the bundle's names of them."""
    (work / "config.yaml").write_text(yaml.safe_dump(_config_of(bundle), sort_keys=False))
    setup = bundle.files_under(f"{TAXONOMY}/") + bundle.files_under(f"{PROMPTS}/")
    _lay_out(bundle, work, setup)
    # a template the result did not use (an import's stages) is never rendered, but the
    # config's prompts folder must hold every one: this package's stands in for it
    version = benchmarks.get(str(bundle.manifest["benchmark"]))
    for stem in version.stems:
        if not template_path(stem, work / PROMPTS).exists():
            shutil.copyfile(
                template_path(stem, version.prompts_dir), template_path(stem, work / PROMPTS)
            )
    return setup


def _lay_out_given(bundle: Bundle, work: Path, skip: set[str], found: Replay) -> None:
    """What is taken as given: every shard no rebuilt job writes (those in `skip`), its
    status beside it, and the other files the bundle carries for the run (imports,
    recordings, grades)."""
    data = [n for n in bundle.manifest["data"] if n not in skip]
    given = [*data, *map(status_of, data)]
    carried = {f"{bundle.target_dir}/{n}" for n in CARRIED}
    others = [
        n
        for n in bundle.index["files"]
        if n not in skip
        and n not in carried
        and not n.endswith(STATUS)
        and not n.startswith((ANSWERS, INDEX))
    ]
    _lay_out(bundle, work, sorted({*given, *others}))
    found.given = sorted(n for n in {*given, *others} if bundle.read(n) is not None)


async def _run(pipeline: Pipeline, jobs: list[JobSpec], store: BundleStore, found: Replay) -> None:
    """The stages' `jobs` in order, answered from the bundle's store alone, then the
    target's results and report."""
    bundle, target, work = store.bundle, store.bundle.target, pipeline.workdir
    missing: dict[str, str] = {}
    fixed = {
        name: NotInBundle(name, m.output_settings(), bundle, missing)
        for name, m in pipeline.config.models.items()
    }
    pool = Pool(work, fixed=fixed, store=store, sends=False)  # type: ignore[arg-type]
    try:
        for stage in ORDER:
            await _stage([s for s in jobs if s.rule == stage], pool, found)
        # a shard as the plan and the progress line count it: a cell's job of a stage
        found.rebuilt_shards = len(jobs)
        await _stage([_gather_spec(pipeline, target, "results", work)], pool, found)
        # the report links the manifest the bundle carries
        manifest = work / pipeline.layout.manifest_json(target)
        manifest.write_bytes(bundle.read(MANIFEST) or b"")
        await _stage([_gather_spec(pipeline, target, "report", work)], pool, found)
    finally:
        await pool.aclose()
    found.missing_answers = missing


def _compare_all(bundle: Bundle, work: Path, rebuilt: list[str], found: Replay) -> None:
    """Each rebuilt file, results and summary against the bundle's and the manifest's."""
    for name in rebuilt:
        _compare(bundle, work, name, found)
    for name in CARRIED[:2]:  # summary.json: bundled with the report, or not at all
        if f"{bundle.target_dir}/{name}" in bundle.index["files"]:
            found.checked.append(name)
            _compare(bundle, work, f"{bundle.target_dir}/{name}", found)
    for name, digest in bundle.index["rebuiltOnly"].items():
        found.checked.append(Path(name).name)
        path = work / name
        if not path.exists() or sha256_file(path) != digest:
            found.differing.append(name)
    results = work / bundle.target_dir / RESULTS
    if results.exists() and sha256_file(results) != bundle.manifest["results"]["sha256"]:
        found.differing.append(f"{bundle.target_dir}/{RESULTS} (against the manifest)")


def _outputs(spec: JobSpec) -> list[str]:
    return [o for o in spec.output_files() if not o.endswith(STATUS)]


def _compare(bundle: Bundle, work: Path, name: str, found: Replay) -> None:
    want = bundle.read(name)
    path = work / name
    got = path.read_bytes() if path.exists() else None
    if want is None and got is None:
        return
    if want is None or got is None or sha256_bytes(want) != sha256_bytes(got):
        found.differing.append(name)


def _code(project: dict[str, Any]) -> str:
    commit = project.get("commit")
    if not commit:
        return f"version {project.get('version')} (no commit known)"
    return f"commit {commit[:12]}" + (" with uncommitted changes" if project.get("dirty") else "")


def replay(path: Path, work: Path, published: Path | None = None) -> Replay:
    """Rebuild the bundle at `path` in the empty folder `work`, and compare (`published`:
    the manifest published with the result, which the bundle's must be)."""
    started = time.monotonic()
    found = Replay()
    bundle = Bundle(path)
    try:
        if published is not None and published.read_bytes() != bundle.read(MANIFEST):
            found.changed_members.append(f"{MANIFEST} (not the one published, {published})")
        found.changed_members += bundle.changed_files()
        found.changed_answers = bundle.changed_answers()
        index = bundle.read(ANSWERS_INDEX) or b""
        found.answers_digest_ok = sha256_bytes(index) == bundle.manifest["answers"]["sha256"]
        statuses = [
            orjson.loads(bundle.read(n) or b"{}")
            for n in bundle.files_under("")
            if n.endswith(STATUS)
        ]
        found.answer_of = rested_keys(statuses)
        made, here = bundle.manifest.get("project", {}), project_facts()
        if made.get("commit") != here.get("commit") or made.get("dirty") or here.get("dirty"):
            # the same answers through other code may give other files
            found.notes.append(
                f"the result was made by kora at {_code(made)}, this replay runs {_code(here)}: "
                "a file that differs may differ by the code"
            )
        cwd = Path.cwd()
        os.chdir(work)  # the jobs read and write relative to the project, as in a run
        try:
            asyncio.run(_rebuild(bundle, work, found))
        finally:
            os.chdir(cwd)
    finally:
        bundle.close()
    found.seconds = time.monotonic() - started
    return found
