"""The call store: what it keeps, what it ignores, and who can read it."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import orjson
import pytest

from kora.llm.base import ChatMessage, Response
from kora.llm.store.cache import CallCache
from tests.fakes import client


def test_a_stored_call_is_replayed(tmp_path: Path) -> None:
    c, _ = client(lambda r: "hello", cache_dir=tmp_path)
    assert asyncio.run(c.text([ChatMessage("user", "hi")], stage="t")) == "hello"
    again, p2 = client(lambda r: "other", cache_dir=tmp_path)
    assert asyncio.run(again.text([ChatMessage("user", "hi")], stage="t")) == "hello"
    assert len(p2.requests) == 0


@pytest.mark.parametrize(
    "entry",
    [
        {"text": "x", "input_tokens": "lots", "output_tokens": 1},
        {"text": "x", "input_tokens": 1, "output_tokens": None},
        {"text": "x", "input_tokens": 1.5e400, "output_tokens": 1},
        {"text": 5},
        [],
    ],
)
def test_a_malformed_entry_is_a_miss_not_a_failure(tmp_path: Path, entry: object) -> None:
    """A damaged or hand-edited entry is fetched again rather than failing the item on
    every rerun."""
    store = CallCache(tmp_path)
    key = "ab" + "0" * 62
    body = dict(key=key, **entry) if isinstance(entry, dict) else entry
    data = (orjson.dumps(body) if "1.5e400" not in str(entry) else
            f'{{"key":"{key}","text":"x","input_tokens":1.5e400}}'.encode())  # fmt: skip
    path = tmp_path / "packs/0.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(data + b"\n")
    assert store.get(key) is None
    store.put(key, Response(text="fetched again"))  # and the answer fetched again is kept
    assert CallCache(tmp_path).get(key) == Response(text="fetched again", meta={"cached": True})


def test_store_files_are_readable_by_the_group_and_others(tmp_path: Path) -> None:
    """On a shared cluster checkout other users of the project read the store."""
    old = os.umask(0o022)
    try:
        CallCache(tmp_path).put("cd" + "1" * 62, Response(text="hi"))
    finally:
        os.umask(old)
    (pack,) = (tmp_path / "packs").iterdir()
    assert stat.S_IMODE(pack.stat().st_mode) == 0o644


def test_a_lone_surrogate_in_an_answer_is_replaced_not_an_error(tmp_path: Path) -> None:
    """JSON can carry an unpaired surrogate escape; it cannot be written as UTF-8."""
    c, _ = client(lambda r: "ok \ud800 then", cache_dir=tmp_path)
    text = asyncio.run(c.text([ChatMessage("user", "hi")], stage="t"))
    assert text == "ok \ufffd then"
    text.encode()  # writable anywhere


def test_an_older_store_still_answers_structured_calls() -> None:
    """The answer type's JSON Schema is built once per process now; the call-store key a
    structured call gets must stay the one it had (an earlier run's store answers)."""
    import hashlib

    from kora.benchmarks.schemas import ScenarioValidation
    from kora.llm.base import Request
    from kora.llm.store.cache import CACHE_VERSION, cache_key

    request = Request(
        messages=(ChatMessage("user", "is it valid?"),),
        system="rules",
        schema=ScenarioValidation,
        max_tokens=100,
        temperature=0.5,
    )
    identity = {"provider": "anthropic", "model": "m"}
    before = {  # the key as it was computed before the schema was cached
        "v": CACHE_VERSION,
        "model": identity,
        "system": "rules",
        "messages": [["user", "is it valid?"]],
        "max_tokens": 100,
        "temperature": 0.5,
        "schema": ScenarioValidation.model_json_schema(),
    }
    blob = orjson.dumps(before, option=orjson.OPT_SORT_KEYS)
    assert cache_key(identity, request) == hashlib.sha256(blob).hexdigest()
    assert cache_key(identity, request) == cache_key(identity, request)


def test_a_cached_schema_is_a_copy_its_caller_may_change() -> None:
    from kora.benchmarks.schemas import ScenarioValidation
    from kora.llm.base import json_schema

    first = json_schema(ScenarioValidation)
    first["properties"].clear()
    first["title"] = "changed"
    assert json_schema(ScenarioValidation) == ScenarioValidation.model_json_schema()
