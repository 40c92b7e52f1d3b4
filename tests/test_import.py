from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from kora.errors import InputError
from kora.imports import import_scenarios
from kora.taxonomy import load_taxonomy
from tests.helpers import REPO, upstream

TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy")


def test_reference_scenarios_fill_the_shards(tmp_path: Path) -> None:
    counts = import_scenarios(upstream("scenarios.jsonl"), TAXONOMY, tmp_path)
    assert counts == {"scenarios": 737, "shards": 737}
    files = [f for f in (tmp_path / "data/scenarios").rglob("*.jsonl")
             if not f.name.endswith(".rejected.jsonl")]  # fmt: skip
    assert len(files) == 750  # every shard of the taxonomy, empty where nothing was imported
    lines = [orjson.loads(x) for f in files for x in f.read_bytes().splitlines() if x.strip()]
    assert len(lines) == 737
    assert all(r["id"] == r["seed"]["id"] for r in lines)


def test_malformed_line_is_named_and_nothing_changes(tmp_path: Path) -> None:
    import_scenarios(upstream("scenarios.jsonl"), TAXONOMY, tmp_path)
    before = {p: p.read_bytes() for p in (tmp_path / "data/scenarios").rglob("*") if p.is_file()}
    lines = upstream("scenarios.jsonl").read_bytes().splitlines()[:5]
    bad = orjson.loads(lines[2])
    bad["narrative"] = "too short"
    lines[2] = orjson.dumps(bad)
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(InputError, match=r"bad\.jsonl:3: field narrative"):
        import_scenarios(src, TAXONOMY, tmp_path)
    good = upstream("scenarios.jsonl").read_bytes().splitlines()[:5]
    src.write_bytes(b"\n".join([*good[:3], b"{not json", *good[3:]]) + b"\n")
    with pytest.raises(InputError, match=r"bad\.jsonl:4: not valid JSON"):
        import_scenarios(src, TAXONOMY, tmp_path)
    after = {p: p.read_bytes() for p in (tmp_path / "data/scenarios").rglob("*") if p.is_file()}
    assert after == before


def test_generated_scenarios_are_not_replaced_silently(tmp_path: Path) -> None:
    shard = tmp_path / "data/scenarios/cybersecurity/7to9/curiosity_exploration.jsonl"
    shard.parent.mkdir(parents=True)
    shard.write_text("")
    with pytest.raises(InputError, match="--replace"):
        import_scenarios(upstream("scenarios.jsonl"), TAXONOMY, tmp_path)
    import_scenarios(upstream("scenarios.jsonl"), TAXONOMY, tmp_path, replace=True)
