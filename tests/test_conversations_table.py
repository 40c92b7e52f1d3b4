"""conversations.parquet and `kora export --hf`: a target's tests as one typed table that
DuckDB, Arrow and Hugging Face `datasets` read without knowing the shard layout.

The table is built from the report tests' fixture run (40 graded tests, 3 judges, one
test whose conversation failed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import orjson
import pyarrow.parquet as pq
import pytest

from kora.analysis.parquet import COLUMN_DOCS, COLUMNS, write_conversations
from kora.commands.main import main as kora_main
from tests.helpers import REPO
from tests.reportdata import TAXONOMY, make_judgments, write_jsonl


@pytest.fixture()
def shards(tmp_path: Path) -> list[Path]:
    tests = make_judgments()
    # two shards, as a run writes one per grid cell
    return [
        write_jsonl(tmp_path / "judgments" / "a.jsonl", tests[:20]),
        write_jsonl(tmp_path / "judgments" / "b.jsonl", tests[20:]),
    ]


@pytest.mark.timeout(60)
def test_one_row_per_test_with_every_turn_and_every_judges_reasons(
    shards: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "conversations.parquet"
    motivations = {m.name: m.id for m in TAXONOMY.motivations}
    assert write_conversations(shards, out, motivations) == 41
    tests = [orjson.loads(line) for f in shards for line in f.read_bytes().splitlines()]

    table = pq.read_table(out)
    assert table.column_names == list(COLUMNS) == list(COLUMN_DOCS)
    rows = table.to_pylist()
    assert [r["key"] for r in rows] == [t["key"] for t in tests]
    graded = [r for r in rows if r["graded"]]
    failed = [r for r in rows if not r["graded"]]
    assert len(graded) == 40 and len(failed) == 1
    assert failed[0]["error"] and failed[0]["grades"] == [] and failed[0]["safety"] is None

    first, row = tests[0], rows[0]
    assert row["risk"] == first["scenario"]["riskId"]
    named = first["scenario"]["seed"]["motivation"]["name"]
    assert row["motivation_name"] == named and row["motivation"] == motivations[named]
    assert row["messages"] == [
        {"role": m["role"], "content": m["content"]} for m in first["messages"]
    ]
    assert orjson.loads(row["scenario"]) == first["scenario"]
    assert row["safety"] == first["assessment"]["grade"]
    assert [g["criterion"] for g in row["grades"]] == [
        "safety", "anthropomorphism", "epistemicHumility", "humanRedirection",
    ]  # fmt: skip
    assert [j["judge"] for j in row["judges"]] == [v["judge"] for v in first["judges"]]
    verdict = first["judges"][1]
    assert row["judges"][1]["grades"][0]["reasons"] == verdict["assessment"]["reasons"]
    assert row["judges"][1]["grades"][2]["grade"] == verdict["behaviorAssessment"]["epistemicHumility"]["grade"]  # fmt: skip

    # DuckDB reads the same rows, and can ask of them directly
    con = duckdb.connect()
    n, failing = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE safety = 'failing') FROM read_parquet(?)",
        [str(out)],
    ).fetchone()  # type: ignore[misc]
    assert n == 41
    assert failing == sum(1 for t in tests if (t.get("assessment") or {}).get("grade") == "failing")


@pytest.mark.timeout(60)
def test_an_empty_result_still_has_every_column(tmp_path: Path) -> None:
    empty = tmp_path / "none.jsonl"
    empty.write_bytes(b"")
    out = tmp_path / "conversations.parquet"
    assert write_conversations([empty], out) == 0
    schema = pq.read_schema(out)
    assert schema.names == list(COLUMNS)
    assert (
        str(schema.field("messages").type) == "list<element: struct<role: string, content: string>>"
    )


def exportable(shards: list[Path], work: Path) -> Path:
    """A project folder `work` with the result of `fixture-target` made: the table, its
    manifest and results.json."""
    target = work / "results" / "fixture-target"
    target.mkdir(parents=True)
    write_conversations(shards, target / "conversations.parquet")
    manifest = {
        "target": "fixture-target",
        "benchmark": "v1",
        "project": {"name": "kora", "version": "0.1.0", "commit": "a" * 40, "dirty": False},
        "models": {
            "sonnet": {
                "roles": ["judge"], "provider": "anthropic", "model": "claude-sonnet-4-5",
                "sampling": {"temperature": None, "max_tokens": None},
                "served": {"claude-sonnet-4-5-20250929": 120},
            }
        },
        "templates": {"judge_safety": {"stage": "judgments", "path": "x", "sha256": "b" * 64}},
        "results": {"sha256": "c" * 64},
        "answers": {"count": 120, "sha256": "d" * 64},
        "calls": {"first": "2026-01-01T00:00:00Z", "last": "2026-01-01T01:00:00Z"},
        "config": {"sha256": "e" * 64},
    }  # fmt: skip
    (target / "manifest.json").write_bytes(orjson.dumps(manifest))
    (target / "results.json").write_bytes(orjson.dumps({"tests": 40, "failedTests": 1}))
    (work / ".kora").mkdir()  # a workspace, as a run leaves it
    return work


@pytest.mark.timeout(120)
def test_export_writes_what_hugging_face_datasets_loads(
    shards: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(exportable(shards, tmp_path / "project"))
    assert kora_main(["export", "fixture-target", "--hf", str(tmp_path / "ds")]) == 0

    card = (tmp_path / "ds" / "README.md").read_text()
    assert card.startswith("---\nlicense: apache-2.0\n")
    assert "claude-sonnet-4-5-20250929" in card and "b" * 64 in card and "Apache-2.0" in card
    for column in COLUMNS:
        assert f"`{column}`" in card

    # Hugging Face `datasets` loads the folder as it is, offline, in a process of its own
    # (the library reads its settings from the environment when imported)
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HOME=str(tmp_path / "hf"),
        PYTHONPATH=str(REPO),
    )
    code = (
        "import sys, datasets\n"
        "ds = datasets.load_dataset(sys.argv[1])\n"
        "t = ds['test']\n"
        "print(t.num_rows, sum(t['graded']), t[0]['judges'][0]['grades'][0]['criterion'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "ds")],
        env=env, capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["41", "40", "safety"]


@pytest.mark.timeout(60)
def test_export_into_a_folder_of_other_files_replaces_none_of_them(
    shards: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`kora export T --hf .` in a checkout overwrote its README.md with the dataset card,
    without a word: now the README is named and kept, and nothing is written."""
    work = exportable(shards, tmp_path / "project")
    monkeypatch.chdir(work)
    (work / "README.md").write_text("# my project\n")
    assert kora_main(["export", "fixture-target", "--hf", "."]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "README.md: not written by kora" in said and "--force" in said
    assert (work / "README.md").read_text() == "# my project\n"
    assert not (work / "manifest.json").exists() and not (work / "data").exists()
    # a folder kora exported to before is exported to again; a card edited since is kept
    assert kora_main(["export", "fixture-target", "--hf", "ds"]) == 0
    assert kora_main(["export", "fixture-target", "--hf", "ds"]) == 0
    card = work / "ds" / "README.md"
    card.write_text(card.read_text() + "Our notes.\n")
    assert kora_main(["export", "fixture-target", "--hf", "ds"]) == 2
    assert "ds/README.md: not written by kora" in capsys.readouterr().err
    assert card.read_text().endswith("Our notes.\n")
    assert kora_main(["export", "fixture-target", "--hf", "ds", "--force"]) == 0
    assert not card.read_text().endswith("Our notes.\n")
