"""Issue 25, item 7: a full disk does not throw away paid answers.

When the call store cannot keep an answer (ENOSPC), the job that paid for it uses it
anyway, the process keeps it for any other job that asks (no second payment), it is
counted as `unstored`, and the run says at its end that the store could not keep N
answers and exits non-zero. No file is ever left half-written."""

from __future__ import annotations

import asyncio
import copy
import errno
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kora.llm.base import ChatMessage, Response
from kora.llm.client import ModelClient
from kora.llm.money.usage import Usage, asked_row
from kora.llm.providers.factories import Shared
from kora.llm.settings.config import ModelConfig
from kora.llm.shared_calls import SharedCalls
from kora.llm.store.cache import CallCache
from kora.run.jobs.progress import Totals, format_totals, unstored_warning
from tests.helpers import copy_workflow
from tests.loopback import OpenAIServer
from tests.workflows import TINY, snakemake


def _disk_full(*args: Any, **kw: Any) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _client(
    url: str, store: Path, shared_calls: SharedCalls, usage: Usage, ahead: bool = False
) -> ModelClient:
    config = ModelConfig(provider="openai", model="m", base_url=f"{url}/v1")
    return ModelClient(
        "m",
        config,
        Shared(store=CallCache(store), usage=usage, shared_calls=shared_calls, ahead=ahead),
    )


async def _ask(client: ModelClient) -> Response:
    return await client.call(client.request([ChatMessage("user", "hi")]), stage="target")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("ahead", [False, True], ids=["by-the-job", "made-ahead"])
def test_an_answer_the_store_cannot_keep_is_used_and_counted(
    ahead: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> None:
    monkeypatch.setattr("kora.llm.store.packs._write", _disk_full)
    shared_calls = SharedCalls()
    openai_server.answer("a paid answer")
    first, second = Usage(), Usage()

    async def run() -> tuple[Response, Response]:
        a = await _ask(_client(openai_server.url, tmp_path, shared_calls, first, ahead=ahead))
        b = await _ask(_client(openai_server.url, tmp_path, shared_calls, second))
        return a, b

    a, b = asyncio.run(run())
    assert openai_server.count == 1  # paid once: the second job got the kept answer
    assert a.text == b.text == "a paid answer"
    assert first.totals()["failures"] == second.totals()["failures"] == 0
    # counted once, by the job that used it first (a call made ahead is no job's)
    assert first.totals()["unstored"] == (0 if ahead else 1)
    assert second.totals()["unstored"] == (1 if ahead else 0)
    # nothing half-written in the store
    assert all(f.stat().st_size == 0 for f in tmp_path.rglob("*") if f.is_file())


@pytest.mark.timeout(30)
def test_a_file_that_cannot_be_written_is_not_left_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kora.run.jobs.shards import write_records

    target = tmp_path / "shard.jsonl"
    monkeypatch.setattr("kora.llm.store.files.os.fsync", _disk_full)
    with pytest.raises(OSError) as info:
        write_records(target, [{"a": 1}] * 100)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.timeout(10)
def test_the_run_line_and_its_end_say_how_many_answers_were_not_kept() -> None:
    assert unstored_warning(0, ".kora/cache") is None
    said = unstored_warning(3, ".kora/cache")
    assert said is not None and "could not keep 3 paid answers" in said
    assert "3 paid answers NOT STORED" in format_totals(Totals(unstored=3))
    assert asked_row({"calls": 2, "unstored": 2})["unstored"] == 2
    assert "unstored" not in asked_row({"calls": 2})  # records as they were when all is well


SITECUSTOMIZE = """
import errno, os
from kora.llm.store import cache

def _full(self, key, response):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.root / "packs/0.jsonl"))

cache.CallCache.put = _full
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_run_whose_store_is_full_finishes_its_results_and_fails_loudly(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    copy_workflow(work)
    inject = tmp_path / "inject"  # every process of the run: the store's disk is full
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(SITECUSTOMIZE)
    cfg: dict[str, Any] = copy.deepcopy(TINY)
    cfg["grid"]["risks"] = cfg["grid"]["risks"][:1]
    (work / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, PYTHONPATH=str(inject))
    run = snakemake(work, "results/tiny/results.json", env=env)
    log = run.stdout + run.stderr
    assert run.returncode != 0, log[-3000:]
    assert "kora: ERROR: the call store .kora/cache could not keep" in log, log[-3000:]
    results = orjson.loads((work / "results/tiny/results.json").read_bytes())
    assert results["complete"] and results["tests"] > 0  # the paid answers were used
    usage = orjson.loads((work / "results/tiny/usage.json").read_bytes())
    assert usage["asked"]["unstored"] > 0
    assert all(f.stat().st_size == 0 for f in (work / ".kora/cache").rglob("*") if f.is_file())
