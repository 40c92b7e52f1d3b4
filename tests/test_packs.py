"""The call store's pack files (kora.llm.store.packs): writers that never share a file, lines
that are always whole, and every process finding what any other stored."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kora.llm.base import Response
from kora.llm.store.cache import CallCache
from kora.llm.store.packs import Index


def _key(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()  # as a call's key is


def _files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "packs").iterdir())


@pytest.mark.timeout(30)
def test_a_run_of_many_calls_makes_no_file_a_call(tmp_path: Path) -> None:
    """The point of packs: a thousand answers are one file, not a thousand."""
    store = CallCache(tmp_path)
    for n in range(1000):
        store.put(_key(n), Response(text=f"answer {n}"))
    assert _files(tmp_path) == ["0.jsonl"]
    again = CallCache(tmp_path)  # a later process
    assert [again.get(_key(n)).text for n in (0, 500, 999)] == ["answer 0", "answer 500", "answer 999"]  # type: ignore[union-attr]  # fmt: skip


@pytest.mark.timeout(30)
def test_the_clients_of_one_process_share_its_pack(tmp_path: Path) -> None:
    """A run's broker opens the store once for each job and model: still one pack, and
    each finds what the others stored after it first looked."""
    a, b = CallCache(tmp_path), CallCache(tmp_path / "." / "")
    assert a.get(_key(1)) is None and b.get(_key(2)) is None  # both looked before either wrote
    a.put(_key(1), Response(text="from a"))
    b.put(_key(2), Response(text="from b"))
    assert _files(tmp_path) == ["0.jsonl"]
    assert b.get(_key(1)).text == "from a"  # type: ignore[union-attr]
    assert a.get(_key(2)).text == "from b"  # type: ignore[union-attr]


def _writer(root: Path, n: int) -> subprocess.Popen[str]:
    """Another process that stores the answer of `_key(n)` and, holding its pack, waits
    to be told to end (a job without the broker, say)."""
    child = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys\n"
            "from kora.llm.base import Response\n"
            "from kora.llm.store.cache import CallCache\n"
            f"s = CallCache({str(root)!r})\n"
            f"s.put({_key(n)!r}, Response(text='from process {n}'))\n"
            "print('stored', flush=True)\n"
            "sys.stdin.read()\n"
        )],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None and child.stdout.readline() == "stored\n"
    return child


@pytest.mark.timeout(60)
@pytest.mark.parametrize("coarse", [True, False], ids=["folder-just-changed", "by-its-mtime"])
def test_other_processes_answers_are_found_while_they_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, coarse: bool
) -> None:
    """Two writers at once keep packs of their own, and a reader finds what each stored
    after it first looked: a new pack when the folder changed (`by-its-mtime`: only the
    folder's mtime tells, not how lately it changed)."""
    if not coarse:
        monkeypatch.setattr("kora.llm.store.packs._COARSE", -1.0)
    first = _writer(tmp_path, 1)
    children = [first]
    try:
        here = CallCache(tmp_path)
        assert here.get(_key(1)).text == "from process 1"  # type: ignore[union-attr]
        assert here.get(_key(2)) is None  # looked: not there yet
        children.append(_writer(tmp_path, 2))  # the first holds pack 0: this one makes 1
        assert here.get(_key(2)).text == "from process 2"  # type: ignore[union-attr]
        here.put(_key(3), Response(text="mine"))
        assert _files(tmp_path) == ["0.jsonl", "1.jsonl", "2.jsonl"]
    finally:
        for child in children:
            child.communicate("", timeout=30)
    assert CallCache(tmp_path).get(_key(3)).text == "mine"  # type: ignore[union-attr]


@pytest.mark.timeout(30)
def test_a_half_line_a_killed_writer_left_is_cut_and_what_came_before_kept(
    tmp_path: Path,
) -> None:
    store = CallCache(tmp_path)
    store.put(_key(1), Response(text="whole"))
    del store
    pack = tmp_path / "packs/0.jsonl"
    with pack.open("ab") as f:  # the writer was killed in the middle of an entry
        f.write(b'{"key":"' + _key(2).encode() + b'","text":"half')
    reader = CallCache(tmp_path)
    assert reader.get(_key(2)) is None  # fetched again, never half an answer
    reader.put(_key(2), Response(text="asked again"))  # the next writer takes the pack
    assert pack.read_bytes().count(b"half") == 0
    later = CallCache(tmp_path)
    assert later.get(_key(1)).text == "whole"  # type: ignore[union-attr]
    assert later.get(_key(2)).text == "asked again"  # type: ignore[union-attr]


@pytest.mark.timeout(30)
def test_a_write_the_disk_refuses_half_way_leaves_the_pack_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CallCache(tmp_path)
    store.put(_key(1), Response(text="kept"))
    before = (tmp_path / "packs/0.jsonl").read_bytes()
    real = os.write

    def half_then_full(fd: int, data: Any) -> int:
        if len(data) > 10:
            return real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("kora.llm.store.packs._write", half_then_full)
    with pytest.raises(OSError, match=r"packs/0\.jsonl"):
        store.put(_key(2), Response(text="x" * 100))
    monkeypatch.undo()
    assert (tmp_path / "packs/0.jsonl").read_bytes() == before
    store.put(_key(3), Response(text="after"))  # room again: the pack goes on whole
    later = CallCache(tmp_path)
    assert later.get(_key(2)) is None
    assert [later.get(_key(n)).text for n in (1, 3)] == ["kept", "after"]  # type: ignore[union-attr]


@pytest.mark.timeout(30)
def test_entries_read_whole_across_the_readers_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader takes a pack a few MB at a time; lines that straddle two reads, and one
    longer than a read, are indexed whole."""
    monkeypatch.setattr("kora.llm.store.packs._CHUNK", 300)
    store = CallCache(tmp_path)
    texts = {n: ("long " * 200 if n == 5 else f"answer {n}") for n in range(20)}
    for n, text in texts.items():
        store.put(_key(n), Response(text=text))
    later = CallCache(tmp_path)
    assert {n: later.get(_key(n)).text for n in texts} == texts  # type: ignore[union-attr]


@pytest.mark.timeout(30)
def test_a_turned_down_answer_is_kept_apart_and_never_served(tmp_path: Path) -> None:
    store = CallCache(tmp_path)
    store.put_rejected(_key(1), Response(text="missed the schema"))
    store.put(_key(1), Response(text="the answer"))
    later = CallCache(tmp_path)
    assert later.get(_key(1)).text == "the answer"  # type: ignore[union-attr]
    assert b"missed the schema" in (later.read_rejected(_key(1)) or b"")
    assert later.read_rejected(_key(2)) is None and later.get(_key(2)) is None
    assert _files(tmp_path) == ["0.jsonl", "0.rejected.jsonl"]


@pytest.mark.timeout(60)
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            # slots at the buckets' edges too (their first byte 0 and 255)
            st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**56 - 1, 2**64 - 1])),
            st.integers(0, 2**20),
            st.integers(0, 2**40),
            st.integers(0, 2**32 - 1),
        ),
        max_size=300,
    ),
    st.lists(st.integers(0, 2**64 - 1), max_size=20),
)
def test_the_index_finds_each_keys_latest_line_and_nothing_else(
    lines: list[tuple[int, int, int, int]], others: list[int]
) -> None:
    """Where each key's line is, as a dict would say: the latest line of a key written
    twice (a pack read again, a retried call) and no line for a key never written."""
    index, model = Index(), {}
    for slot, pack, offset, length in lines:
        index.put(slot, pack, offset, length)
        model[slot] = (pack, offset, length)
    assert {slot: index.get(slot) for slot in model} == model
    assert all(index.get(s) is None for s in others if s not in model)
    assert len(index) == len(model)


@pytest.mark.timeout(30)
def test_the_run_s_own_plan_reads_the_store_as_it_was_when_the_run_began(tmp_path: Path) -> None:
    """The run counts its plan beside itself while its calls are stored: a frozen reader
    finds what was stored before, and none of what the run stores after, in a pack it
    grows or a new one; the plan would take those answers for stored ones, and the
    progress line would project the run's total from too few calls to pay."""
    from kora.run.plan import PlanStore

    writer = CallCache(tmp_path)
    writer.put(_key(1), Response(text="before"))
    plan = PlanStore.as_now(tmp_path)
    writer.put(_key(2), Response(text="after, same pack"))
    subprocess.run(  # another process: a pack of its own
        [sys.executable, "-c", "import sys; from kora.llm.store.cache import CallCache; "
         "from kora.llm.base import Response; "
         f"CallCache(sys.argv[1]).put({_key(3)!r}, Response(text='after, new pack'))",
         str(tmp_path)],
        check=True,
    )  # fmt: skip
    assert len(_files(tmp_path)) == 2
    assert plan.get(_key(1)).text == "before"  # type: ignore[union-attr]
    assert plan.get(_key(2)) is None and plan.get(_key(3)) is None
    assert CallCache(tmp_path).get(_key(3)) is not None  # an ordinary reader finds both
