"""A result that carries its evidence, end to end: a run against a loopback Anthropic server
that answers as dated snapshots writes manifest.json (which snapshot served each role,
the SHA-256 of each template as it is on disk, no key in any form) and
conversations.parquet; `kora bundle`, then `kora replay` in an empty folder with no key
and no provider reachable, rebuilds results.json byte for byte; an answer changed in the
bundle is named. Snakemake's own report holds the result files; v2 writes its manifest
under its own results folder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow.parquet as pq
import pytest
import yaml

from kora.llm.masking import Masker
from tests.helpers import REPO, copy_workflow
from tests.loopback import Recorded, Reply
from tests.workflows import TINY, Run, Server, config, snakemake, structured_answer

pytestmark = pytest.mark.slow
KEY = "test-key"  # the key tests.workflows.Run gives the run
OFFLINE = str(REPO / "tests" / "offline")


class Dated(Server):
    """Answers every model as its dated snapshot, as the API answers an alias; and gives
    every safety judgment first an answer that breaks its schema, the right one when
    asked again (so the result rests on answers its jobs turned down, whatever order the
    calls come in)."""

    def _next_answer(self, rec: Recorded, *, structured: bool, invalid: bool) -> Any:
        tools = rec.body.get("tools") or [{}]
        asked_again = "previous answer was rejected" in orjson.dumps(rec.body["messages"]).decode()
        if tools[0].get("name") == "TestAssessment" and not asked_again:
            invalid = True
        return super()._next_answer(rec, structured=structured, invalid=invalid)

    def handle(self, rec: Recorded, *, invalid: bool) -> Any:
        reply = super().handle(rec, invalid=invalid)
        doc = orjson.loads(reply.body)
        if isinstance(doc, dict) and isinstance(doc.get("model"), str):
            doc["model"] += "-20250929"
        return Reply.json(reply.status, doc, reply.headers)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def kora(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kora.commands.main", *args],
        cwd=cwd, env=env or dict(os.environ), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def no_way_out() -> dict[str, str]:
    """No key of any provider, every provider's address closed, every host unknown."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    dead = "http://127.0.0.1:9"
    env |= {"ANTHROPIC_BASE_URL": dead, "OPENAI_BASE_URL": dead, "HTTPS_PROXY": dead}
    env["PYTHONPATH"] = os.pathsep.join([OFFLINE, str(REPO)])
    return env


def tamper(bundle: Path, out: Path, stage: str) -> str:
    """A copy of `bundle` with one stored answer of `stage` changed; its key."""
    with zipfile.ZipFile(bundle) as z:
        statuses = [orjson.loads(z.read(n)) for n in z.namelist() if n.endswith(".status.json")]
        kept = {Path(n).name for n in z.namelist()}
        key = next(
            row[0]
            for s in statuses
            for row in s.get("calls", [])
            if row[2] == stage and f"{row[0]}.json" in kept  # an answer the job took
        )
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as w:
            for name in z.namelist():
                data = z.read(name)
                if name.endswith(f"/{key}.json"):
                    entry = orjson.loads(data)
                    answer = orjson.loads(entry["text"])
                    answer["grade"] = "exemplary" if answer["grade"] == "failing" else "failing"
                    entry["text"] = orjson.dumps(answer).decode()
                    data = orjson.dumps(entry)
                w.writestr(name, data)
    return key


@pytest.mark.timeout(900)
def test_manifest_bundle_and_replay(tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    server = Dated(structured=structured_answer).start()
    copy_workflow(work)
    shutil.copytree(REPO / "kora" / "benchmarks" / "v1" / "prompts", work / "prompts")
    run = Run(work, server)
    try:
        run.snakemake(config(server.url, ["t1"], ["judge"]), "results/t1/report.html")
    finally:
        server.stop()
    folder = work / "results" / "t1"
    text = (folder / "manifest.json").read_text()
    manifest = orjson.loads(text)

    # which snapshot served each model, every stored answer counted once
    for name in ("seed", "expand", "user", "judge", "t1"):
        m = manifest["models"][name]
        assert m["model"] == f"claude-{name}" and m["structuredOutput"] == "tool"
        assert m["served"] == {f"claude-{name}-20250929": m["answers"]} and m["answers"] > 0
    assert sum(m["answers"] for m in manifest["models"].values()) == manifest["answers"]["count"]
    assert manifest["answers"]["stored"] == manifest["answers"]["count"]
    # the judge's template as it is on disk
    judge = manifest["templates"]["judge_safety"]
    assert judge == {
        "stage": "judgments", "path": "prompts/judge_safety.jinja",
        "sha256": sha(work / "prompts/judge_safety.jinja"),
    }  # fmt: skip
    assert manifest["results"]["sha256"] == sha(folder / "results.json")
    assert manifest["benchmark"] == "v1" and manifest["software"]["snakemake"]
    assert manifest["calls"]["first"] <= manifest["calls"]["last"]
    assert manifest["calls"]["made"] == manifest["answers"]["count"]
    # no key in any form (as it is, escaped, encoded, inside base64)
    assert not Masker([KEY]).masked(text)[1]
    # summary.json and the report point to it
    assert orjson.loads((folder / "summary.json").read_bytes())["manifest"] == "manifest.json"
    assert 'href="manifest.json"' in (folder / "report.html").read_text()

    # the table: one row per test results.json counts
    results = orjson.loads((folder / "results.json").read_bytes())
    table = str(folder / "conversations.parquet")
    graded, failed = (
        duckdb.connect()
        .execute(
            "SELECT count(*) FILTER (WHERE graded), count(*) FILTER (WHERE NOT graded) "
            "FROM read_parquet(?)",
            [table],
        )
        .fetchone()
    )  # type: ignore[misc]
    assert (graded, failed) == (results["tests"], results["failedTests"]) and graded > 0
    assert pq.read_table(table).num_rows == results["tests"] + results["failedTests"]

    # an edited template: its new hash after the rerun, the others as they were
    template = work / "prompts" / "judge_safety.jinja"
    template.write_text(
        template.read_text().replace("{% endblock %}", "\nBe brief.\n{% endblock %}", 1)
    )
    run.server = server = Dated(structured=structured_answer).start()
    try:
        cfg = config(server.url, ["t1"], ["judge"])
        run.snakemake(cfg, "results/t1/report.html")
    finally:
        server.stop()
    again = orjson.loads((folder / "manifest.json").read_bytes())
    assert again["templates"]["judge_safety"]["sha256"] == sha(template) != judge["sha256"]
    assert again["templates"]["scenario"] == manifest["templates"]["scenario"]
    assert again["answers"]["sha256"] != manifest["answers"]["sha256"]

    # the bundle: the same bytes each time, no key in it
    made = kora(work, "bundle", "t1", "-o", "t1.zip", "--configfile", "run.yaml")
    assert made.returncode == 0, made.stderr
    first = (work / "t1.zip").read_bytes()
    assert kora(work, "bundle", "t1", "-o", "t1.zip", "--configfile", "run.yaml").returncode == 0
    assert (work / "t1.zip").read_bytes() == first
    with zipfile.ZipFile(work / "t1.zip") as z:
        assert not any(Masker([KEY]).masked(z.read(n).decode())[1] for n in z.namelist())
        # the judgments turned down, kept for the replay to show the judge again
        turned_down = sum(n.endswith(".rejected.json") for n in z.namelist())
        assert turned_down == results["tests"] + results["failedTests"] > 0

    # replayed in an empty folder, with no key and no provider within reach
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    keep = tmp_path / "rebuilt"
    done = kora(empty, "replay", str(work / "t1.zip"), "--keep", str(keep), env=no_way_out())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "identical" in done.stderr
    assert (keep / "results/t1/results.json").read_bytes() == (folder / "results.json").read_bytes()
    assert (keep / "results/t1/report.html").read_bytes() == (folder / "report.html").read_bytes()
    # checked against the manifest published with the result, and against another
    published = kora(empty, "replay", str(work / "t1.zip"), "--manifest", str(folder / "manifest.json"),
                     env=no_way_out())  # fmt: skip
    assert published.returncode == 0, published.stderr[-3000:]
    (tmp_path / "earlier.json").write_text(text)  # the manifest before the template's edit
    other = kora(empty, "replay", str(work / "t1.zip"), "--manifest", str(tmp_path / "earlier.json"),
                 env=no_way_out())  # fmt: skip
    assert other.returncode == 1 and "manifest.json (not the one published" in other.stderr

    # an answer changed in the bundle is named, and the files it changed
    key = tamper(work / "t1.zip", tmp_path / "tampered.zip", "judge_safety")
    bad = kora(empty, "replay", str(tmp_path / "tampered.zip"), env=no_way_out())
    assert bad.returncode == 1, bad.stderr[-3000:]
    assert f"answer {key} (judge, judge_safety): not the one the result rests on" in bad.stderr
    assert "differs: results/t1/judgments/" in bad.stderr

    # a template edited after the result was made: not bundled as if it had made it
    template.write_text(template.read_text() + "\n")
    stale = kora(work, "bundle", "t1", "-o", "stale.zip", "--configfile", "run.yaml")
    assert stale.returncode != 0 and "prompts/judge_safety.jinja changed" in stale.stderr


@pytest.mark.timeout(600)
def test_snakemakes_own_report_holds_the_results(tmp_path: Path) -> None:
    copy_workflow(tmp_path)
    # config.yaml's own target dropped, as the demo does: all is then the tiny target's
    cfg = {**TINY, "targets": {**TINY["targets"], "gpt-target": None}}
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    done = snakemake(tmp_path)  # every target's results and reports, and the leaderboard
    assert done.returncode == 0, done.stderr[-3000:]
    report = snakemake(tmp_path, "--report", "report.zip")
    assert report.returncode == 0, report.stderr[-3000:]
    with zipfile.ZipFile(tmp_path / "report.zip") as z:
        names = z.namelist()
    # each file under a folder of its own (report/data/raw/<id>/<name>)
    held = {Path(n).name for n in names if "/data/raw/" in n}
    assert {"results.json", "report.html", "manifest.json", "leaderboard.html"} <= held, names


@pytest.mark.timeout(600)
def test_the_scores_alone_are_reported_bundled_and_replayed(tmp_path: Path) -> None:
    """After the README's main command (results.json alone, no report, no leaderboard):
    Snakemake's report packs the files there are, `kora bundle` bundles the result without
    a report and `kora replay` checks what it holds, also once the bundle is unpacked and
    packed again with directory entries (as `zip -r` packs it)."""
    copy_workflow(tmp_path)
    cfg = {**TINY, "targets": {**TINY["targets"], "gpt-target": None}}
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    done = snakemake(tmp_path, "results/tiny/results.json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (tmp_path / "results/tiny/report.html").exists()

    report = snakemake(tmp_path, "--report", "report.zip")
    assert report.returncode == 0, report.stderr[-3000:]
    with zipfile.ZipFile(tmp_path / "report.zip") as z:
        held = {Path(n).name for n in z.namelist() if "/data/raw/" in n}
    assert {"results.json", "manifest.json"} <= held and "leaderboard.html" not in held, held

    made = kora(tmp_path, "bundle", "tiny", "-o", "tiny.zip", "--configfile", "tiny.yaml")
    assert made.returncode == 0, made.stderr
    assert "report" in made.stderr and "not bundled" in made.stderr, made.stderr
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(tmp_path / "tiny.zip") as z:
        z.extractall(unpacked)
    shutil.make_archive(str(tmp_path / "again"), "zip", unpacked)  # with folders' entries
    with zipfile.ZipFile(tmp_path / "again.zip") as z:
        assert "taxonomy/" in z.namelist()
    (tmp_path / "elsewhere").mkdir()
    for bundle in ("tiny.zip", "again.zip"):
        replayed = kora(tmp_path / "elsewhere", "replay", str(tmp_path / bundle), env=no_way_out())
        assert replayed.returncode == 0, replayed.stderr[-3000:]
        assert "identical: results.json and every rebuilt shard" in replayed.stderr
        assert "report.html" not in replayed.stderr.split("identical")[-1]


@pytest.mark.timeout(600)
def test_kora_v2_writes_its_manifest_under_its_own_results_and_replays(tmp_path: Path) -> None:
    copy_workflow(tmp_path)
    cfg = {
        **{k: TINY[k] for k in ("seed_model", "expand_model", "user_model", "judges", "targets")},
        "benchmark": "v2",
        "grid": {"risks": ["cybersecurity"], "age_ranges": ["13to17"],
                 "motivations": ["curiosity_exploration"], "total_seeds": 1},
    }  # fmt: skip
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    done = snakemake(tmp_path, "results-v2/tiny/report.html")
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = orjson.loads((tmp_path / "results-v2/tiny/manifest.json").read_bytes())
    assert manifest["benchmark"] == "v2"
    assert "judge_mechanisms" in manifest["templates"]
    assert manifest["templates"]["judge_mechanisms"]["path"].startswith("kora/benchmarks/v2/")
    assert (tmp_path / "results-v2/tiny/conversations.parquet").exists()
    # and it replays as v1's does
    made = kora(tmp_path, "bundle", "tiny", "-o", "tiny.zip", "--configfile", "tiny.yaml")
    assert made.returncode == 0, made.stderr
    (tmp_path / "elsewhere").mkdir()
    done = kora(tmp_path / "elsewhere", "replay", str(tmp_path / "tiny.zip"), env=no_way_out())
    assert done.returncode == 0 and "identical" in done.stderr, done.stderr[-3000:]


@pytest.mark.timeout(600)
def test_imported_conversations_are_taken_as_given_and_their_judgments_replayed(
    tmp_path: Path,
) -> None:
    copy_workflow(tmp_path)
    shutil.copytree(REPO / "config", tmp_path / "config", dirs_exist_ok=True)
    shutil.copytree(REPO / "data" / "examples", tmp_path / "data" / "examples")
    files = ["--configfile", "config/demo.yaml", "config/recorded.yaml"]
    imported = kora(tmp_path, "import-conversations", "data/examples/recorded.jsonl", *files)
    assert imported.returncode == 0, imported.stderr
    run = snakemake(
        tmp_path, "results/recorded-bot/report.html", *files, configfile=None, timeout=500
    )
    assert run.returncode == 0, run.stderr[-3000:]
    manifest = orjson.loads((tmp_path / "results/recorded-bot/manifest.json").read_bytes())
    # only the judges' templates made this result: no seed, scenario or conversation
    assert {t["stage"] for t in manifest["templates"].values()} == {"judgments"}
    assert kora(tmp_path, "bundle", "recorded-bot", "-o", "r.zip", *files).returncode == 0
    (tmp_path / "elsewhere").mkdir()
    done = kora(tmp_path / "elsewhere", "replay", str(tmp_path / "r.zip"), env=no_way_out())
    assert done.returncode == 0 and "identical" in done.stderr, done.stderr[-3000:]
    assert "taken as given, not rebuilt" in done.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_report_of_a_config_whose_results_are_not_there_keeps_the_last_one(
    tmp_path: Path,
) -> None:
    """Issue 58: `snakemake --report report.zip` without the run's --configfile (so of
    config.yaml's target, which has no results here) replaced a good report.zip with one
    holding Snakemake's page alone. It is refused now, saying to give the run's
    --configfile, and the report made before is left as it was; the same once the
    leaderboard is there (Snakemake then ended on a file "marked for report but does
    not exist")."""
    copy_workflow(tmp_path)
    cfg = {**TINY, "targets": {**TINY["targets"], "gpt-target": None}}
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    for asked in (["results/tiny/results.json"], []):
        done = snakemake(tmp_path, *asked)
        assert done.returncode == 0, done.stderr[-3000:]
        made = snakemake(tmp_path, "--report", "report.zip")
        assert made.returncode == 0, made.stderr[-3000:]
        good = (tmp_path / "report.zip").read_bytes()
        bare = snakemake(tmp_path, "--report", "report.zip", configfile=None)
        said = " ".join((bare.stdout + bare.stderr).split())
        assert bare.returncode == 1, said[-3000:]
        assert "results/gpt-target/results.json" in said and "give the run's --configfile" in said
        assert "this folder has results of tiny" in said, said[-3000:]
        assert "Traceback" not in said and "Report created" not in said
        assert (tmp_path / "report.zip").read_bytes() == good
