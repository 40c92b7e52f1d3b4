from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from kora import benchmarks
from kora.benchmarks.layout import Layout
from kora.benchmarks.taxonomy import load_taxonomy
from kora.errors import InputError
from kora.run.ingest import import_scenarios
from tests.helpers import REPO, upstream

TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy")
V1_LAYOUT = Layout.of(benchmarks.get("v1"))


@pytest.fixture
def in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The importers write into the current folder, as the commands run in the project's."""
    monkeypatch.chdir(tmp_path)


@pytest.mark.usefixtures("in_tmp_path")
@pytest.mark.slow
def test_reference_scenarios_fill_the_shards(tmp_path: Path) -> None:
    counts = import_scenarios(upstream("scenarios.jsonl"), TAXONOMY, V1_LAYOUT)
    assert counts == {"scenarios": 737, "shards": 737}
    files = [f for f in (tmp_path / "data/scenarios").rglob("*.jsonl")
             if not f.name.endswith(".rejected.jsonl")]  # fmt: skip
    assert len(files) == 750  # every shard of the taxonomy, empty where nothing was imported
    lines = [orjson.loads(x) for f in files for x in f.read_bytes().splitlines() if x.strip()]
    assert len(lines) == 737
    assert all(r["id"] == r["seed"]["id"] for r in lines)


@pytest.mark.usefixtures("in_tmp_path")
@pytest.mark.slow
def test_malformed_line_is_named_and_nothing_changes(tmp_path: Path) -> None:
    import_scenarios(upstream("scenarios.jsonl"), TAXONOMY, V1_LAYOUT)
    before = {p: p.read_bytes() for p in (tmp_path / "data/scenarios").rglob("*") if p.is_file()}
    lines = upstream("scenarios.jsonl").read_bytes().splitlines()[:5]
    bad = orjson.loads(lines[2])
    bad["narrative"] = "too short"
    lines[2] = orjson.dumps(bad)
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(InputError, match=r"bad\.jsonl:3: field narrative"):
        import_scenarios(src, TAXONOMY, V1_LAYOUT)
    good = upstream("scenarios.jsonl").read_bytes().splitlines()[:5]
    src.write_bytes(b"\n".join([*good[:3], b"{not json", *good[3:]]) + b"\n")
    with pytest.raises(InputError, match=r"bad\.jsonl:4: not valid JSON"):
        import_scenarios(src, TAXONOMY, V1_LAYOUT)
    after = {p: p.read_bytes() for p in (tmp_path / "data/scenarios").rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.usefixtures("in_tmp_path")
@pytest.mark.slow
def test_generated_scenarios_are_not_replaced_silently(tmp_path: Path) -> None:
    shard = tmp_path / "data/scenarios/cybersecurity/7to9/curiosity_exploration.jsonl"
    shard.parent.mkdir(parents=True)
    shard.write_text("")
    with pytest.raises(InputError, match="--replace"):
        import_scenarios(upstream("scenarios.jsonl"), TAXONOMY, V1_LAYOUT)
    import_scenarios(upstream("scenarios.jsonl"), TAXONOMY, V1_LAYOUT, replace=True)


def recorded_conversations(n: int) -> list[dict]:
    lines = upstream("scenarios.jsonl").read_bytes().splitlines()[:n]
    out = []
    for line in lines:
        sc = orjson.loads(line)
        out.append({
            "id": sc["seed"]["id"], "modelId": "recorded-bot", "scenario": sc, "prompt": "child",
            "messages": [{"role": "user", "content": sc["firstUserMessage"]},
                         {"role": "assistant", "content": "Let's talk to a grown-up about it."}],
        })  # fmt: skip
    return out


@pytest.mark.usefixtures("in_tmp_path")
@pytest.mark.slow
def test_recorded_conversations_are_judged_without_calling_a_target(tmp_path: Path) -> None:
    """Re-judging (spec section 7 `reassess`): recorded transcripts, judges only."""
    import yaml

    from kora.run.ingest import import_conversations
    from tests.helpers import copy_workflow
    from tests.workflows import snakemake

    copy_workflow(tmp_path)
    src = tmp_path / "recorded.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recorded_conversations(12)))
    assert import_conversations(src, TAXONOMY, V1_LAYOUT) == {"recorded-bot": 12}
    cfg = {
        "seed_model": "mock", "expand_model": "mock", "user_model": "mock", "judges": ["mock"],
        "targets": {"recorded-bot": {"imported": True, "prompts": ["child"]}},
        "grid": {"risks": ["violence_and_physical_harm"], "age_ranges": ["7to9", "10to12"]},
    }  # fmt: skip
    (tmp_path / "re.yaml").write_text(yaml.safe_dump(cfg))
    run = snakemake(tmp_path, "results/recorded-bot/results.json", configfile="re.yaml")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "rule conversations" not in run.stdout + run.stderr
    assert "rule seeds" not in run.stdout + run.stderr
    assert "rule judgments" in run.stderr  # where the run lists its jobs
    results = orjson.loads((tmp_path / "results/recorded-bot/results.json").read_bytes())
    assert results["conversations"] == "imported"
    in_grid = [
        r
        for r in recorded_conversations(12)
        if r["scenario"]["seed"]["ageRange"] in ("7to9", "10to12")
    ]
    assert results["tests"] == len(in_grid) > 0
    assert {s["prompt"] for s in results["scores"]} == {"child"}


@pytest.mark.usefixtures("in_tmp_path")
def test_recorded_conversation_errors_name_the_line(tmp_path: Path) -> None:
    from kora.run.ingest import import_conversations

    records = recorded_conversations(3)
    records[1]["prompt"] = "adult"
    src = tmp_path / "recorded.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    with pytest.raises(InputError, match=r"recorded\.jsonl:2: field prompt"):
        import_conversations(src, TAXONOMY, V1_LAYOUT)
    assert not (tmp_path / "results").exists()


@pytest.mark.usefixtures("in_tmp_path")
@pytest.mark.parametrize("where", ["scenario", "seed"])
def test_a_recorded_conversation_in_the_wrong_category_is_refused(
    tmp_path: Path, where: str
) -> None:
    """Every record imported is written: one whose category does not hold its risk is an
    error naming the line, as import-scenarios does, and nothing is written."""
    from kora.run.ingest import import_conversations

    records = recorded_conversations(6)
    holder = records[3]["scenario"] if where == "scenario" else records[3]["scenario"]["seed"]
    holder["riskCategoryId"] = "online_safety"
    if where == "scenario":
        records[3]["scenario"]["seed"]["riskCategoryId"] = "online_safety"
    src = tmp_path / "recorded.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    with pytest.raises(InputError, match=r"recorded\.jsonl:4: .*not in category 'online_safety'"):
        import_conversations(src, TAXONOMY, V1_LAYOUT)
    assert not (tmp_path / "results").exists()


@pytest.mark.usefixtures("in_tmp_path")
@pytest.mark.slow
def test_every_imported_conversation_is_written(tmp_path: Path) -> None:
    from kora.run.ingest import import_conversations

    src = tmp_path / "recorded.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recorded_conversations(12)))
    counts = import_conversations(src, TAXONOMY, V1_LAYOUT)
    written = sum(
        1
        for f in (tmp_path / "results/recorded-bot/conversations").rglob("*.jsonl")
        for line in f.read_bytes().splitlines()
        if line.strip()
    )
    assert counts == {"recorded-bot": written}


@pytest.mark.parametrize("command", ["import-scenarios", "import-conversations", "aggregate"])
def test_a_missing_input_file_is_named_without_a_traceback(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from kora.commands.main import main

    missing = tmp_path / "nowhere.jsonl"
    args = [command, str(missing)] + (
        ["-o", str(tmp_path / "r.json")] if command == "aggregate" else []
    )
    assert main(args) == 2
    err = capsys.readouterr().err
    assert str(missing) in err
    assert "not found" in err.lower() or "no such file" in err.lower()
    assert "Traceback" not in err


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_runs_conversations_are_not_replaced_by_an_import_without_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kora import-conversations FILE --target T` replaced the conversations a run of T
    had made (and paid for) without a word."""
    from kora.commands.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".kora").mkdir()  # a workspace, as a run makes one
    src = tmp_path / "recorded.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recorded_conversations(3)))
    made = tmp_path / "results/mock-target/conversations/cybersecurity/7to9/x.jsonl"
    made.parent.mkdir(parents=True)
    made.write_text('{"a run\'s": "conversation"}\n')
    command = ["--taxonomy", str(REPO / "data/taxonomy"), "import-conversations", str(src)]
    assert main([*command, "--target", "mock-target"]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "results/mock-target/conversations holds conversations a run made" in said
    assert "--force" in said
    assert made.read_text() == '{"a run\'s": "conversation"}\n'
    assert main([*command, "--target", "mock-target", "--force"]) == 0
    assert not made.exists()
    assert main([*command, "--target", "mock-target"]) == 0  # an import replaces an import
