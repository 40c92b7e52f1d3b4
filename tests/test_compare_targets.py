"""`kora compare-targets NEW BASELINE`: names in the config's results folder (v1 and v2),
folders of the reference's per-test JSON (what `kora aggregate` imports), comparison.json,
the gate's exit status, people's grades, mixed versions refused."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from kora.commands.main import main as kora_main
from tests.comparedata import per_test, table_pairs, write_reference
from tests.reportdata import make_judgments, write_jsonl


@pytest.fixture()
def workdir(tmp_path: Path) -> Iterator[Path]:
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(cwd)


def reference_pair(
    folder: Path, table: tuple[int, int, int, int], version: str = "v1", grade: str = "failing"
) -> tuple[Path, Path]:
    """NEW and BASELINE as folders of per-test JSON whose safety table on `grade` is given."""
    new, base = [], []
    for i, (ga, gb) in enumerate(table_pairs(*table, grade=grade)):
        risk = "cybersecurity" if i % 2 else "violence_and_physical_harm"
        new.append(per_test(f"s{i}", ga, risk=risk, version=version))
        base.append(per_test(f"s{i}", gb, risk=risk, version=version))
    return write_reference(folder / "new", new), write_reference(folder / "base", base)


def run(*args: str) -> int:
    return kora_main(["compare-targets", *args])


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_gate_exit_status_and_comparison_json(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(workdir / "results" / "good" / "judgments" / "s.jsonl", make_judgments("good"))
    write_jsonl(
        workdir / "results" / "bad" / "judgments" / "s.jsonl", make_judgments("bad", flip=True)
    )
    assert run("bad", "good", "--fail-if-worse") == 1
    out = capsys.readouterr().out
    assert "gate: bad is significantly worse than good (any cell after Holm across 10 cells" in out
    gate = out[out.index("gate:") :].splitlines()
    assert [line.split(":")[0].strip() for line in gate[1:]] == [
        "safety overall",
        "safety risk cybersecurity",
    ]
    # the cells that differ come first in the table
    table = out.split("\n\n")[1].splitlines()
    assert table[1].startswith("safety overall") and "bad worse" in table[1]
    # beside NEW's results, not in the folder the command was run from
    assert "comparison: results/bad/compare-good.json" in out
    assert not (workdir / "comparison.json").exists()
    doc = orjson.loads((workdir / "results" / "bad" / "compare-good.json").read_bytes())
    assert (doc["schema"], doc["a"], doc["b"], doc["paired"]) == (
        "kora-comparison/1",
        "bad",
        "good",
        40,
    )
    # the other way round: nothing worse, exit 0; without the flag always 0
    assert run("good", "bad", "--fail-if-worse", "-o", "other.json") == 0
    assert "gate: good is not significantly worse than bad" in capsys.readouterr().out
    assert orjson.loads((workdir / "other.json").read_bytes())["a"] == "good"
    assert run("bad", "good") == 0
    # overall alone; Benjamini-Hochberg adds the cells it finds; exemplary counts too
    assert run("bad", "good", "--fail-if-worse", "--overall") == 1
    out = capsys.readouterr().out
    assert "safety's overall failing rate, alpha 0.05" in out
    assert "safety risk cybersecurity: fails" not in out
    assert run("bad", "good", "--fail-if-worse", "--adjust", "bh") == 1
    assert out.count("fails more often") == 1
    assert capsys.readouterr().out.count("fails more often") == 5
    assert run("bad", "good", "--fail-if-worse", "--exemplary") == 1
    assert "safety overall: is exemplary less often" in capsys.readouterr().out
    # --json: the document on stdout, the gate's lines on stderr
    assert run("bad", "good", "--json", "--fail-if-worse") == 1
    got = capsys.readouterr()
    assert orjson.loads(got.out)["families"]["failing"]["holm"] == 2
    assert got.err.startswith("gate: bad is significantly worse")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_reference_per_test_folders(
    workdir: Path, version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    new, base = reference_pair(workdir / "imported", (5, 20, 2, 33), version)
    assert run(str(new), str(base), "--fail-if-worse", "--interval", "tango") == 1
    # folders given by path: the results folder holds it, not the folders of per-test files
    assert not [*new.glob("compare-*"), *base.glob("compare-*")]
    doc = orjson.loads((workdir / "results" / "compare-new-base.json").read_bytes())
    assert doc["benchmark"] == version and doc["interval"] == "tango"
    overall = doc["cells"][0]
    assert overall["id"] == "safety/overall"
    assert (overall["failing"]["aOnly"], overall["failing"]["bOnly"]) == (20, 2)
    if version == "v2":
        assert "sycophancy/overall" in [c["id"] for c in doc["cells"]]
    assert "safety overall: fails more often" in capsys.readouterr().out


@pytest.mark.timeout(60)
def test_v2_names_resolve_in_results_v2(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "v2.yaml").write_text("benchmark: v2\n")
    reference_pair(workdir / "results-v2", (0, 3, 3, 10), "v2")
    assert run("new", "base", "--configfile", "v2.yaml", "--fail-if-worse") == 0
    assert "cells that differ after Holm: none" in capsys.readouterr().out
    # without the config, the names are looked for in results/
    assert run("new", "base") == 2
    assert "new: neither a path nor a target with results under results/" in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_v1_against_v2_is_refused(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    v1, _ = reference_pair(workdir / "one", (1, 2, 3, 4), "v1")
    _, v2 = reference_pair(workdir / "two", (1, 2, 3, 4), "v2")
    assert run(str(v1), str(v2)) == 2
    err = capsys.readouterr().err
    assert f"{v2} ({v2}) holds KORA v2 results, but this run's config is KORA v1" in err
    assert not list(workdir.rglob("compare-*.json"))


@pytest.mark.timeout(60)
def test_people_grades_over_the_judges(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the judge fails NEW on 12 scenarios where BASELINE passes; people looked at 10 of
    # them and found them adequate: with their grades, the gate passes
    made = reference_pair(workdir / "made", (0, 12, 0, 20))
    new, base = workdir / "results" / "new", workdir / "results" / "base"
    for target, folder in zip((new, base), made, strict=True):
        target.mkdir(parents=True)
        folder.rename(target / "judgments")  # a target's folder: judgments/, annotations/
    assert run("new", "base", "--fail-if-worse") == 1
    keys = [
        f"online_safety:cybersecurity:7to9:s{i}:default"
        if i % 2
        else f"physical_and_legal_safety:violence_and_physical_harm:7to9:s{i}:default"
        for i in range(10)
    ]
    (new / "annotations").mkdir()
    (new / "annotations" / "ann.jsonl").write_bytes(
        b"".join(
            orjson.dumps({"key": k, "criterion": "safety", "grade": "adequate"}) + b"\n"
            for k in keys
        )
    )
    capsys.readouterr()
    assert run("new", "base", "--fail-if-worse", "--grades", "human") == 0
    doc = orjson.loads((new / "compare-base.json").read_bytes())
    assert doc["grades"] == "human" and doc["humanGrades"] == {"a": 10, "b": 0}
    assert doc["cells"][0]["failing"]["aOnly"] == 2
    assert "grades: human" in capsys.readouterr().out


@pytest.mark.timeout(60)
def test_no_shared_test_and_bad_alpha(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_reference(workdir / "a", [per_test("x1", "failing")])
    write_reference(workdir / "b", [per_test("x2", "failing")])
    assert run("a", "b") == 2
    assert "a and b share no test" in capsys.readouterr().err
    assert run("a", "b", "--alpha", "1.5") == 2
    assert "--alpha must be between 0 and 1" in capsys.readouterr().err
