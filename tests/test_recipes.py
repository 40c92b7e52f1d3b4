"""docs/architecture.md's recipes, followed to the letter: a copy of the project gets a toy
provider, a toy model setting, a toy stage, a toy figure in the bill and two files
renamed, exactly where "Where a new thing goes" says, nothing else changes, and the
workflow runs them end to end (the copy's package first on the path).

If a recipe leaves out a place a new provider or stage must be named, this run fails, and
the recipe (or the code that asks for the extra place) is what to mend."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from tests.helpers import REPO, copy_workflow
from tests.workflows import SNAKEMAKE, TINY

pytestmark = pytest.mark.slow

# "A provider": its ProviderKind in the registry, the class that answers its calls, and
# (it answers single calls) its factory
ECHO_KIND = '        ProviderKind("echo"),\n'
ECHO_CLASS = '''"""A toy provider: each answer repeats the end of the last message."""

from kora.llm.base import Request, Response
from kora.llm.settings.config import ModelConfig


class EchoProvider:
    def __init__(self, name: str, config: ModelConfig) -> None:
        self.name = name
        self.label = f"model {name!r} (echo)"
        self.tail = config.echo_tail  # the toy model setting's (below)

    async def generate(self, request: Request) -> Response:
        last = request.messages[-1].content
        text = f"echo: {last[-self.tail:]}"
        return Response(text=text, input_tokens=len(last) // 4, output_tokens=9, audio_tokens=5)

    async def aclose(self) -> None:
        return None
'''
ECHO_FACTORY = """

def _echo(name: str, config: ModelConfig) -> Provider:
    from kora.llm.echo import EchoProvider

    return EchoProvider(name, config)
"""

# "A model setting": its ModelConfig field, declaring what it changes (the provider above
# sends it)
ECHO_SETTING = "    echo_tail: Annotated[int, Changes.ANSWERS] = 40\n"

# "A stage": its module in kora/run/stages/ (its job's models, each model param's Role on
# itself, its Stage subclass as `STAGE`), its name in the stages' list (ORDER), the
# templates it renders in Benchmark.stage_templates, a rule in rules/ (included by the
# Snakefile) that takes everything from it, and the rule's script
ECHOES_STAGE = '''"""A toy stage: each seed of a cell said back by the seed model."""

from functools import cached_property
from pathlib import Path
from typing import Annotated

from kora.benchmarks.schemas import ScenarioSeed
from kora.llm.base import ChatMessage
from kora.llm.chain import Asker
from kora.run.jobs.shard_run import ShardJob
from kora.run.jobs.shards import read_shard
from kora.run.stages.base import (
    Done, Job, Role, RoleParams, Rules, ShardParams, Sources, Stage, as_read
)


class EchoesInput(Sources):
    seeds: Path


class EchoesParams(ShardParams):
    model: Annotated[RoleParams, Role("seed_model", "echo", {"echo": 1.0})]


class EchoesJob(Job):
    input: EchoesInput
    params: EchoesParams

    @cached_property
    def clients(self) -> Asker:
        return self.ctx.asker(self.params.model)


class EchoesStage(Stage[EchoesJob, ScenarioSeed, dict[str, str]]):
    name = "echoes"
    feeds_on = "seeds"
    job_type = EchoesJob

    def data(self, pipeline: Rules) -> str:
        return "data/echoes/{risk}/{age}/{motivation}.jsonl"

    def sources(self, pipeline: Rules, wc: dict[str, str]) -> dict[str, str]:
        return {"seeds": pipeline.layout.seeds(pipeline.cell_of(wc))}

    def units(self, job: EchoesJob) -> list[ScenarioSeed]:
        return read_shard(job.input.seeds, ScenarioSeed)

    def units_from(self, job: EchoesJob, result: object) -> list[ScenarioSeed]:
        return [as_read(s, ScenarioSeed) for s in result] if isinstance(result, list) else []

    async def work(self, job: EchoesJob, unit: ScenarioSeed) -> dict[str, str]:
        text = await job.clients.text([ChatMessage("user", f"Say {unit.id}")], stage="echo")
        return {"seed": unit.id, "echo": text}

    def nominal(self, job: EchoesJob, unit: ScenarioSeed | None) -> int:
        return 1

    def label(self, job: EchoesJob, unit: ScenarioSeed) -> str:
        return f"seed {unit.id}"

    def write(self, job: EchoesJob, shard: ShardJob, done: Done[ScenarioSeed, dict[str, str]]) -> int:
        return shard.write(job.ctx, [r for _, r in done if not isinstance(r, BaseException)])


STAGE = EchoesStage()
'''
ECHOES_RULE = """rule echoes:
    input:
        unpack(PIPELINE.rule_input("echoes")),
    output:
        shards=directory(PIPELINE.rule_output("echoes")),
    log:
        PIPELINE.rule_log("echoes"),
    params:
        **PIPELINE.rule_params("echoes"),
    script:
        "../scripts/echoes.py"
"""
ECHOES_SCRIPT = """from typing import Any

from kora.run.broker.dispatch import run

snakemake: Any

run("echoes", snakemake)
"""


def insert(path: Path, after: str, text: str) -> None:
    """`text` after the first line holding `after` (which the recipe's place must have)."""
    source = path.read_text()
    at = source.index(after)
    end = source.index("\n", at) + 1
    path.write_text(source[:end] + text + source[end:])


def replace(path: Path, old: str, new: str) -> None:
    """`old` (which the recipe's place must hold once) made `new`."""
    source = path.read_text()
    assert source.count(old) == 1, f"{old!r} is not once in {path}"
    path.write_text(source.replace(old, new))


def add_a_figure_to_the_bill(kora: Path) -> None:
    """ "A per-call figure in the bill": a toy kind of token, `audio_tokens`."""
    insert(kora / "llm/base.py", "    reasoning_tokens: int = 0", "    audio_tokens: int = 0\n")
    usage = kora / "llm/money/usage.py"
    insert(usage, "    reasoning_tokens: int = 0", "    audio_tokens: int = 0\n")
    replace(usage, "resp.reasoning_tokens)", "resp.reasoning_tokens, resp.audio_tokens)")
    shown = '        if self.audio_tokens:\n            out["audio_tokens"] = self.audio_tokens\n'
    insert(usage, 'out["reasoning_tokens"] = self.reasoning_tokens', shown)
    bill = kora / "llm/money/bill.py"
    insert(
        bill,
        'doc["rt"] = c.reasoning_tokens',
        '        if c.audio_tokens:\n            doc["at"] = c.audio_tokens\n',
    )
    insert(
        bill,
        'reasoning_tokens=int(d.get("rt", 0)),',
        '                audio_tokens=int(d.get("at", 0)),\n',
    )
    replace(
        kora / "commands/usage.py", '"cache_read_tokens")', '"cache_read_tokens", "audio_tokens")'
    )
    replace(
        kora / "llm/money/budget.py",
        "+ c.cache_read_tokens)",
        "+ c.cache_read_tokens + c.audio_tokens)",
    )


def rename_a_result_and_a_companion(kora: Path) -> None:
    """ "A file of a result renamed", and a shard's companion: their one constant each."""
    replace(kora / "benchmarks/layout.py", 'USAGE = "usage.json"', 'USAGE = "spend.json"')
    replace(kora / "benchmarks/layout.py", 'STATUS = ".status.json"', 'STATUS = ".state.json"')


def follow_the_recipes(copy: Path) -> None:
    kora = copy / "kora"
    insert(kora / "llm/registry.py", 'ProviderKind("mock"', ECHO_KIND)
    (kora / "llm/echo.py").write_text(ECHO_CLASS)
    providers = kora / "llm/providers/factories.py"
    insert(providers, "    return MockProvider(name, config)", ECHO_FACTORY)
    insert(providers, '    "mock": _mock,', '    "echo": _echo,\n')
    insert(kora / "llm/settings/config.py", "    app: Annotated[", ECHO_SETTING)
    (kora / "run/stages/echoes.py").write_text(ECHOES_STAGE)
    stages = kora / "run/stages/__init__.py"
    listed = stages.read_text()
    assert '"judgments")' in listed, "the stages' list is not where the recipe says"
    stages.write_text(listed.replace('"judgments")', '"judgments", "echoes")'))
    insert(
        kora / "benchmarks/base.py", '"seeds": ("seeds",),', '            "echoes": ("seeds",),\n'
    )
    (copy / "rules/echoes.smk").write_text(ECHOES_RULE)
    insert(copy / "Snakefile", 'include: "rules/judgments.smk"', 'include: "rules/echoes.smk"\n')
    (copy / "scripts/echoes.py").write_text(ECHOES_SCRIPT)
    add_a_figure_to_the_bill(kora)
    rename_a_result_and_a_companion(kora)


@pytest.mark.timeout(600)
def test_the_recipes_run_end_to_end_as_they_say(tmp_path: Path) -> None:
    copy = copy_workflow(tmp_path)
    shutil.copytree(REPO / "kora", copy / "kora", ignore=shutil.ignore_patterns("__pycache__"))
    # the sample test every template is rendered for before a run (showcase.check_templates)
    (copy / "docs").mkdir(exist_ok=True)
    shutil.copy(REPO / "docs/example-scenario.json", copy / "docs")
    follow_the_recipes(copy)
    tiny = {
        **TINY,
        "models": {"echo": {"provider": "echo", "echo_tail": 12}},
        "targets": {"gpt-target": None, "tiny": {"model": "echo", "prompts": ["default", "child"]}},
    }
    (copy / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    risk = TINY["grid"]["risks"][0]  # type: ignore[index]
    cell = f"{risk}/{TINY['grid']['age_ranges'][0]}/{TINY['grid']['motivations'][0]}"  # type: ignore[index]
    echoes = f"data/echoes/{cell}.jsonl"
    env = dict(os.environ, PYTHONPATH=str(copy))  # the copy's package before the installed one
    done = subprocess.run(
        # a stage's job makes its risk's folder: that is what a run asks for
        [*SNAKEMAKE, "--cores", "2", "results/tiny/results.json", f"data/echoes/{risk}",
         "--configfile", "tiny.yaml"],
        cwd=copy, env=env, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    # the toy provider answered the target's turns
    results = orjson.loads((copy / "results/tiny/results.json").read_bytes())
    assert results["tests"] > 0 and results["models"]["echo"]["provider"] == "echo"
    shard = copy / "results/tiny/conversations" / f"{cell}.jsonl"
    turns = shard.read_text()
    assert "echo: " in turns, shard
    # the toy setting reached the provider, and the shard's params (a change re-runs it)
    made = [json.loads(line)["messages"] for line in turns.splitlines()]
    replies = [m["content"] for ms in made for m in ms if m["role"] == "assistant"]
    assert replies and all(len(r) <= len("echo: ") + 12 for r in replies), replies[:3]
    asked = orjson.loads(shard.with_suffix(".state.json").read_bytes())
    assert '"echo_tail": 12' in json.dumps(asked["models"]), asked["models"]
    # the toy stage wrote each seed said back, its calls in the run's bill under its kind
    said = [orjson.loads(line) for line in (copy / echoes).read_text().splitlines()]
    seeds = (copy / f"data/seeds/{cell}.jsonl").read_text().splitlines()
    assert len(said) == len(seeds) > 0
    assert all(r["echo"] and r["seed"] for r in said)
    status = orjson.loads((copy / f"data/echoes/{cell}.state.json").read_bytes())
    assert {u["stage"] for u in status["usage"]} == {"echo"}
    # the model its one Role declares: the rule's param, and the status's name for it
    assert status["models"]["echo"]["name"] == "mock"
    # the renamed files under their new names, and nothing under the old ones
    assert (copy / "results/tiny/spend.json").is_file()
    made = [p.name for p in (copy / "results").rglob("*")] + [
        p.name for p in (copy / "data").rglob("*")
    ]
    assert "usage.json" not in made and not [n for n in made if n.endswith(".status.json")]
    # the toy figure: the bill's lines, usage.json (renamed above), `kora usage`, its table
    usage = orjson.loads((copy / "results/tiny/spend.json").read_bytes())
    assert '"audio_tokens"' in json.dumps(usage), usage
    kora_usage = [sys.executable, "-m", "kora.commands.main", "usage"]
    shown = subprocess.run(
        [*kora_usage, "--json"], cwd=copy, env=env, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    bill = orjson.loads(shown.stdout)
    echo = next(r for r in bill["byModel"] if r["name"] == "echo")  # 5 audio tokens an answer
    assert bill["billed"]["audio_tokens"] == echo["audio_tokens"] == 5 * echo["calls"] > 0
    table = subprocess.run(
        kora_usage, cwd=copy, env=env, capture_output=True, text=True, timeout=120
    )
    assert table.returncode == 0 and "audio" in table.stdout, table.stdout + table.stderr
