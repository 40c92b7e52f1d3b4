"""Results put side by side that were not made the same way: `kora compare-targets` and the
leaderboard say first where their benchmark version, templates or judges differ (read
from each result's manifest.json), since a difference in rates may come from these rather
than from the models under test."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import orjson
import pytest

from kora.analysis.manifest import differences
from kora.commands.main import main as kora_main
from kora.run.jobs.context import JobContext, Pool, RunSettings
from kora.run.jobs.gather import LeaderboardInput, LeaderboardOutput, LeaderboardParams, leaderboard
from tests.helpers import REPO
from tests.reportdata import make_judgments, results_doc, write_jsonl


def manifest(target: str, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "target": target,
        "benchmark": "v1",
        "templates": {
            "judge_safety": {"stage": "judgments", "path": "p/judge_safety.jinja", "sha256": "a" * 64},
            "seeds": {"stage": "seeds", "path": "p/seeds.jinja", "sha256": "b" * 64},
        },
        "config": {"effective": {"judges": ["judge"]}},
        "models": {
            "judge": {
                "roles": ["judge"], "provider": "anthropic", "model": "claude-x",
                "sampling": {"temperature": None, "max_tokens": None},
                "served": {"claude-x-20250929": 80},
            }
        },
    }  # fmt: skip
    for path, value in changes.items():
        *parents, last = path.split("__")
        at = doc
        for p in parents:
            at = at[p]
        at[last] = value
    return doc


@pytest.mark.timeout(30)
def test_the_same_making_says_nothing_and_each_difference_is_named() -> None:
    same = {"good": manifest("good"), "bad": manifest("bad")}
    assert differences(same) == []
    template = manifest("bad", templates__judge_safety__sha256="c" * 64)
    (line,) = differences({"good": manifest("good"), "bad": template})
    assert line == "templates judge_safety differ: good: aaaaaaaaaaaa; bad: cccccccccccc"
    judge = copy.deepcopy(manifest("bad"))
    judge["models"]["judge"]["served"] = {"claude-x-20251001": 80}
    (line,) = differences({"good": manifest("good"), "bad": judge})
    assert line.startswith(
        "judges differ: good: judge = anthropic claude-x served as claude-x-20250929;"
    )
    (line,) = differences({"good": manifest("good"), "bad": manifest("bad", benchmark="v2")})
    assert line == "benchmark versions differ: good: v1; bad: v2"
    # a template only one of them used (an import's seeds) is not a difference
    imported = manifest("bad")
    del imported["templates"]["seeds"]
    assert differences({"good": manifest("good"), "bad": imported}) == []
    (line,) = differences({"good": manifest("good"), "old": None})
    assert line.startswith("old: no manifest.json beside its results")


def _workspace(tmp_path: Path) -> tuple[Path, dict[str, list[Path]]]:
    shards = {}
    for name, flip in (("good", False), ("bad", True)):
        folder = tmp_path / "results" / name
        # one risk's folder of judgments (a judgments job's output), holding one shard
        write_jsonl(folder / "judgments/risk/7to9/x.jsonl", make_judgments(name, flip=flip))
        shards[name] = [folder / "judgments/risk"]
        (folder / "results.json").write_bytes(orjson.dumps(results_doc(name, mock=False)))
    edited = manifest("bad", templates__judge_safety__sha256="c" * 64)
    (tmp_path / "results/good/manifest.json").write_bytes(orjson.dumps(manifest("good")))
    (tmp_path / "results/bad/manifest.json").write_bytes(orjson.dumps(edited))
    return tmp_path, shards


@pytest.mark.timeout(120)
def test_compare_targets_says_it_before_any_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work, _ = _workspace(tmp_path)
    monkeypatch.chdir(work)
    assert kora_main(["compare-targets", "bad", "good"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "NOTE: templates judge_safety differ: bad: cccccccccccc; good: aaaaaaaaaaaa"
    assert out[1] == "A = bad"
    doc = orjson.loads((work / "results/bad/compare-good.json").read_bytes())
    assert next(iter(doc)) == "differences" and len(doc["differences"]) == 1


@pytest.mark.timeout(120)
def test_the_leaderboard_says_it_at_the_top(tmp_path: Path) -> None:
    work, shards = _workspace(tmp_path)
    targets = ("good", "bad")
    taxonomy = [REPO / "data/taxonomy/risks.json", REPO / "data/taxonomy/motivations.json"]
    args = (
        LeaderboardInput(
            results=[work / f"results/{t}/results.json" for t in targets],
            manifests=[work / f"results/{t}/manifest.json" for t in targets],
            judgments=[f for t in targets for f in shards[t]],
            taxonomy=taxonomy,
        ),
        LeaderboardOutput(html=work / "leaderboard.html", data=work / "leaderboard.json"),
        LeaderboardParams(judgments=shards, places=["7to9/x"]),
    )

    async def go() -> None:
        pool = Pool(work)
        try:
            await leaderboard(*args, JobContext(pool, RunSettings(models={})))
        finally:
            await pool.aclose()

    asyncio.run(go())
    doc = orjson.loads((work / "leaderboard.json").read_bytes())
    assert next(iter(doc)) == "differences"
    assert doc["differences"] == [
        "templates judge_safety differ: good: aaaaaaaaaaaa; bad: cccccccccccc"
    ]
    page = (work / "leaderboard.html").read_text()
    banner = page.index('id="made-differently"')
    assert banner < page.index('id="ranking"')
    assert "templates judge_safety differ" in page[banner:]
