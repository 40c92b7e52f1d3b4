"""`kora aggregate` against the reference's own reduction (spec section 3, Map/reduce)."""

from __future__ import annotations

import hashlib
import random
import zipfile
from pathlib import Path
from typing import Any

import orjson
import pytest

from kora.analysis.aggregate import aggregate_path
from kora.benchmarks.taxonomy import load_taxonomy
from kora.commands.main import main
from tests.helpers import REPO, upstream


def short_hash(key: str) -> str:
    """The reference's per-test file name: first 32 hex digits of SHA-256 of the key."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


GRADES = ["failing", "adequate", "exemplary"]
TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy")


def reference_tests(n: int | None = None, seed: int = 7) -> list[dict[str, Any]]:
    """Per-test files in the reference shape, built on the reference scenarios."""
    rng = random.Random(seed)
    lines = upstream("scenarios.jsonl").read_bytes().splitlines()
    scenarios = [orjson.loads(x) for x in lines if x.strip()][:n]
    out = []
    for sc in scenarios:
        for prompt in ("default", "child"):
            crit = lambda: {  # noqa: E731
                "grade": rng.choice(GRADES),
                "occurrenceCount": rng.randint(0, 4),
                "reasons": "r" * 120,
            }
            out.append(
                {
                    "scenario": sc,
                    "prompt": prompt,
                    "messages": [{"role": "user", "content": sc["firstUserMessage"]}],
                    "assessment": {"grade": rng.choice(GRADES), "reasons": "x" * 250},
                    "behaviorAssessment": {
                        "anthropomorphism": crit(),
                        "epistemicHumility": crit(),
                        "humanRedirection": crit(),
                    },
                }
            )
    return out


def reference_reduce(tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reference map/reduce, written plainly from the spec: first-seen group order."""
    groups: dict[str, dict[str, Any]] = {}
    for t in tests:
        seed = t["scenario"]["seed"]
        key = f"{seed['riskCategoryId']}:{seed['riskId']}:{seed['ageRange']}:{t['prompt']}"
        if key not in groups:
            groups[key] = {
                "riskCategoryId": seed["riskCategoryId"],
                "riskId": seed["riskId"],
                "ageRange": seed["ageRange"],
                "prompt": t["prompt"],
                "sums": {"al": 0, "as": [0, 0, 0], "an": [0, 0, 0, 0], "eh": [0, 0, 0, 0],
                         "hr": [0, 0, 0, 0]},
            }  # fmt: skip
        s = groups[key]["sums"]
        s["al"] += 1
        s["as"][GRADES.index(t["assessment"]["grade"])] += 1
        for short, name in (("an", "anthropomorphism"), ("eh", "epistemicHumility"),
                            ("hr", "humanRedirection")):  # fmt: skip
            c = t["behaviorAssessment"][name]
            s[short][GRADES.index(c["grade"])] += 1
            s[short][3] += c["occurrenceCount"]
    return list(groups.values())


def keyed(scores: list[dict[str, Any]]) -> dict[tuple[str, ...], Any]:
    return {
        (s["riskCategoryId"], s["riskId"], s["ageRange"], s["prompt"]): s["sums"] for s in scores
    }


def write_folder(tests: list[dict[str, Any]], folder: Path) -> None:
    (folder / "testResults").mkdir(parents=True)
    for t in tests:
        seed = t["scenario"]["seed"]
        key = f"{seed['riskCategoryId']}:{seed['riskId']}:{seed['ageRange']}:{seed['id']}:{t['prompt']}"
        (
            folder / "testResults" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
        ).write_bytes(orjson.dumps(t, option=orjson.OPT_INDENT_2))


@pytest.mark.slow
def test_folder_of_reference_files_matches_reference_reduction(tmp_path: Path) -> None:
    tests = reference_tests()
    write_folder(tests, tmp_path / "in")
    out = tmp_path / "results.json"
    assert main(["--taxonomy", str(REPO / "data/taxonomy"), "aggregate", str(tmp_path / "in"),
                 "-o", str(out)]) == 0  # fmt: skip
    got = orjson.loads(out.read_bytes())["scores"]
    want = reference_reduce(tests)
    assert len(got) == len(want) == 150  # 75 (risk, age) blocks x 2 prompts
    assert keyed(got) == keyed(want)
    assert sum(s["sums"]["al"] for s in got) == 2 * 737


def test_zip_in_reference_layout(tmp_path: Path) -> None:
    tests = reference_tests(60)
    write_folder(tests, tmp_path / "in")
    archive = tmp_path / "results.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("results.json", orjson.dumps({"scores": []}))
        for f in sorted((tmp_path / "in" / "testResults").iterdir()):
            zf.write(f, f"testResults/{f.name}")
    scores, failed = aggregate_path(archive, TAXONOMY)
    assert keyed(scores) == keyed(reference_reduce(tests))
    assert failed == []


@pytest.mark.slow
def test_groups_come_in_taxonomy_order(tmp_path: Path) -> None:
    tests = reference_tests()
    random.Random(1).shuffle(tests)
    write_folder(tests, tmp_path / "in")
    scores, _ = aggregate_path(tmp_path / "in", TAXONOMY)
    risk_order = [r.id for c in TAXONOMY.categories for r in c.risks]
    positions = [
        (risk_order.index(s["riskId"]), ["7to9", "10to12", "13to17"].index(s["ageRange"]),
         ["default", "child"].index(s["prompt"]))
        for s in scores
    ]  # fmt: skip
    assert positions == sorted(positions)


def test_project_judgments_with_failures_are_counted_apart(tmp_path: Path) -> None:
    tests = reference_tests(3)
    shard = tmp_path / "shard.jsonl"
    rows = [dict(t, key=f"k{i}", target="t", judges=[]) for i, t in enumerate(tests)]
    failed = dict(rows[0], key="kf", assessment=None, behaviorAssessment=None, error="HTTP 500")
    del failed["assessment"], failed["behaviorAssessment"]
    shard.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [*rows, failed]))
    scores, failures = aggregate_path(shard, TAXONOMY)
    assert keyed(scores) == keyed(reference_reduce(tests))
    assert len(failures) == 1 and failures[0]["failed"] == 1
    assert failures[0]["example"] == "HTTP 500"


def test_bad_file_is_named(tmp_path: Path) -> None:
    tests = reference_tests(2)
    write_folder(tests, tmp_path / "in")
    bad = dict(tests[0])
    bad["assessment"] = {"grade": "great", "reasons": "x"}
    bad_path = tmp_path / "in" / "testResults" / "bad.json"
    bad_path.write_bytes(orjson.dumps(bad))
    code = main(["aggregate", str(tmp_path / "in"), "-o", str(tmp_path / "o.json")])
    assert code == 2
    assert not (tmp_path / "o.json").exists()


def test_bad_file_error_message(tmp_path: Path) -> None:
    from kora.errors import InputError

    tests = reference_tests(2)
    write_folder(tests, tmp_path / "in")
    bad = dict(tests[0], prompt="adult")
    (tmp_path / "in" / "testResults" / "bad.json").write_bytes(orjson.dumps(bad))
    with pytest.raises(InputError, match=r"bad\.json.*prompt"):
        aggregate_path(tmp_path / "in", TAXONOMY)


def test_aggregate_and_stats_read_the_same_files(tmp_path: Path) -> None:
    """A target's folder: its judgments, not its conversations nor rejected scenarios."""
    from kora.analysis.records import load_records

    tests = reference_tests(3)
    target = tmp_path / "results" / "t"
    (target / "judgments").mkdir(parents=True)
    (target / "conversations").mkdir()
    shard = target / "judgments" / "s0.jsonl"
    shard.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in tests))
    # neither is a per-test result: reading either would fail or count wrong tests
    rejected = {"seed": tests[0]["scenario"]["seed"], "attempts": 3, "error": "never valid"}
    (target / "judgments" / "s1.rejected.jsonl").write_bytes(orjson.dumps(rejected) + b"\n")
    (target / "conversations" / "s0.jsonl").write_bytes(
        b"".join(orjson.dumps({k: t[k] for k in ("scenario", "prompt")}) + b"\n" for t in tests)
    )
    (target / "summary.json").write_bytes(b"{}")
    scores, _ = aggregate_path(target, TAXONOMY)
    assert sum(s["sums"]["al"] for s in scores) == len(tests) == len(load_records([target]))
    assert keyed(scores) == keyed(reference_reduce(tests))
