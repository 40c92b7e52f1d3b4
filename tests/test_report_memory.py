"""The report job draws report.html in bounded memory (issue 62): it holds each test's
grades, but the conversations, scenarios and judges' reasons only a chunk of the page's
texts at a time. The run's figures (the job's peak on the whole grid) are
bench/full_grid.py's; here, what the job's Python allocations grow by when the run has ten
times the conversations, and that the page is the same bytes either way."""

from __future__ import annotations

import asyncio
import re
import shutil
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from kora.analysis.records import load_records
from kora.analysis.report import browser
from kora.analysis.report.pages import write_report
from kora.benchmarks.outcomes import Judgment, Message
from kora.run.jobs.gather import ReportInput, ReportOutput, ReportParams, report
from tests.helpers import REPO, copy_workflow
from tests.reportdata import TAXONOMY, make_judgments, results_doc, write_jsonl
from tests.workflows import command

PLACES = [f"7to9/m{i}" for i in range(7)]


def _run(tmp: Path, copies: int, words: int) -> tuple[Path, int]:
    """A run's judgments folder: the fixture run `copies` times under new keys, each reply
    `words` words long, spread over PLACES' shards; and the bytes of the texts."""
    folder = tmp / "judgments" / "risk"
    shards: list[list[Judgment]] = [[] for _ in PLACES]
    text = 0
    for c in range(copies):
        for i, j in enumerate(make_judgments()):
            key = f"{j.key}:{c}"
            reply = " ".join(f"{key}-{w}" for w in range(words))
            messages = [Message(role=m.role, content=m.content) for m in j.messages]
            if messages:
                messages[1] = Message(role="assistant", content=reply)
            text += len(reply)
            shards[(i + c) % len(PLACES)].append(
                j.model_copy(update={"key": key, "messages": messages})
            )
    for place, judgments in zip(PLACES, shards, strict=True):
        write_jsonl(folder / f"{place}.jsonl", judgments)
    return folder, text


def _draw(tmp: Path, folder: Path) -> None:
    """The report job, as the report rule runs it."""
    (tmp / "results.json").write_bytes(orjson.dumps(results_doc()))
    ctx: Any = SimpleNamespace(pool=SimpleNamespace(taxonomy=lambda files, bm: TAXONOMY))
    inputs = ReportInput(judgments=[folder], results=tmp / "results.json", taxonomy=[])
    outputs = ReportOutput(html=tmp / "report.html", summary=tmp / "summary.json")
    asyncio.run(report(inputs, outputs, ReportParams(target="t", places=PLACES), ctx))


def _peak(tmp: Path, copies: int) -> tuple[int, int]:
    """(the most the report job's Python allocations held at once, the texts' bytes)."""
    folder, text = _run(tmp, copies, words=400)
    tracemalloc.start()
    try:
        _draw(tmp, folder)
        return tracemalloc.get_traced_memory()[1], text
    finally:
        tracemalloc.stop()


@pytest.mark.timeout(240)
def test_the_report_job_holds_a_chunk_of_texts_not_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # chunks of 40 tests (xz's own buffers, which tracemalloc counts, are one compressor's
    # at both sizes)
    monkeypatch.setattr(browser, "TEXT_CHUNK", 40)
    _draw(tmp_path / "warm", _run(tmp_path / "warm", 1, words=10)[0])  # imports, templates
    small, small_text = _peak(tmp_path / "small", 2)  # 82 tests
    big, big_text = _peak(tmp_path / "big", 20)  # 820 tests, 10x the texts
    assert big_text - small_text > 30_000_000
    # holding every conversation at once grew by more than the texts added (48 MB for 31);
    # holding each test's grades and a chunk of texts, by a few KB a test (5.7 MB)
    assert big - small < 0.35 * (big_text - small_text), (small, big)


def test_the_page_of_light_records_is_the_page_of_whole_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report job reads the texts again a chunk at a time: the page and summary.json
    are the bytes the whole records give (chunks of 7 tests: scenarios and shards met in
    an order that jumps between files)."""
    monkeypatch.setattr(browser, "TEXT_CHUNK", 7)
    folder, _ = _run(tmp_path, 2, words=5)
    files = sorted(folder.rglob("*.jsonl"))
    pages = []
    for light in (False, True):
        out = tmp_path / f"light-{light}"
        out.mkdir()
        records = load_records(files, light=light)
        write_report(records, results_doc(), out / "r.html", out / "s.json", TAXONOMY)
        pages.append(((out / "r.html").read_bytes(), (out / "s.json").read_bytes()))
    assert pages[0] == pages[1]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_run_of_several_targets_reads_one_target_at_a_time(tmp_path: Path) -> None:
    """Four targets' report jobs at once held 558 MB, four results jobs beside the broker
    took the run past 500 MB (bench/README.md, issue 62): each results and report job
    takes the run's one `whole_target_jobs`, which the workflow's own profile gives every
    run (a --profile beside it, profiles/slurm, keeps it)."""
    import yaml

    copy_workflow(tmp_path)
    shutil.copytree(REPO / "config", tmp_path / "config")
    line = "snakemake -n --cores 10 --configfile config/demo.yaml config/demo-pair.yaml"
    run = command(tmp_path, line)
    assert run.returncode == 0, run.stderr[-2000:]
    jobs = run.stdout.split("\nrule ")
    readers = [j for j in jobs if j.startswith(("report:", "results:"))]
    assert len(readers) == 4, run.stdout[-2000:]
    assert all(re.search(r"resources: .*\bwhole_target_jobs=1\b", j) for j in readers), readers
    profile = yaml.safe_load((tmp_path / "profiles/default/config.yaml").read_text())
    assert "whole_target_jobs=1" in profile["resources"]
