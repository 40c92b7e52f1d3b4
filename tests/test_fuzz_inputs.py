"""Issue 25: the parsers of what users hand kora, fuzzed with Hypothesis.

Config files (an overlay over config.yaml), the JSONL importers (`kora import-scenarios`,
`kora import-conversations`, `kora continue`), the reference run's per-test files in a
.zip, and `kora aggregate`'s inputs (a folder of .json/.jsonl files, a .zip). Each input
ends in success or in the project's own error naming the file (and its line or field),
never in a traceback; a failed import leaves every file already written as it was.

100 inputs per parser here; 10,000 each under the slow mark (about 2 minutes each on a
2-core machine, the aggregation's about 20: DuckDB reads every input).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import strategies as st

from kora import benchmarks
from kora.analysis.aggregate import aggregate_path
from kora.benchmarks.layout import Layout
from kora.benchmarks.taxonomy import Taxonomy, load_taxonomy_files
from kora.config.files import load_run_config
from kora.run.continuation import stage_recordings
from kora.run.ingest import import_conversations, import_scenarios
from tests.fuzzing import MANY, VALUES, encoded, expect_own_error, fuzz, jsonl, mutated, snapshot
from tests.helpers import REPO

QUICK = 100
SCENARIO: dict[str, Any] = orjson.loads((REPO / "docs" / "example-scenario.json").read_bytes())
MESSAGES = [
    {"role": "user", "content": SCENARIO["firstUserMessage"]},
    {"role": "assistant", "content": "Let's think about a safer ramp together."},
]
RECORDED = {"scenario": SCENARIO, "prompt": "child", "messages": MESSAGES, "modelId": "bot"}
_CRIT = {"grade": "adequate", "occurrenceCount": 1, "reasons": "r" * 120}
PER_TEST = {
    "scenario": SCENARIO,
    "prompt": "default",
    "messages": MESSAGES,
    "assessment": {"grade": "failing", "reasons": "x" * 250},
    "behaviorAssessment": {
        k: _CRIT for k in ("anthropomorphism", "epistemicHumility", "humanRedirection")
    },
}
LAYOUT = Layout.of(benchmarks.get("v1"))


@pytest.fixture(scope="module")
def taxonomy(tmp_path_factory: pytest.TempPathFactory) -> Taxonomy:
    """The example scenario's risk and motivation only: an import writes 3 shards, not
    750, so that thousands of successful imports take seconds."""
    folder = tmp_path_factory.mktemp("taxonomy")
    risks = orjson.loads((REPO / "data/taxonomy/risks.json").read_bytes())
    risk_id = SCENARIO["riskId"]
    cats = [c for c in risks if any(r["id"] == risk_id for r in c["risks"])]
    cats[0]["risks"] = [r for r in cats[0]["risks"] if r["id"] == risk_id]
    motivations = orjson.loads((REPO / "data/taxonomy/motivations.json").read_bytes())
    name = SCENARIO["seed"]["motivation"]["name"]
    (folder / "risks.json").write_bytes(orjson.dumps(cats))
    (folder / "motivations.json").write_bytes(
        orjson.dumps([m for m in motivations if m["name"] == name])
    )
    return load_taxonomy_files(folder / "risks.json", folder / "motivations.json")


def _in(folder: Path, call: Callable[[], object]) -> Callable[[], object]:
    """`call` run in `folder`: the importers write into the current folder, as the
    commands run in the project's."""

    def run() -> object:
        with contextlib.chdir(folder):
            return call()

    return run


class Workdir:
    """A project folder that already holds an import, a recording and other files;
    restored after each successful import, compared after each failed one."""

    def __init__(self, root: Path, taxonomy: Taxonomy) -> None:
        self.root, self.pristine = root / "work", root / "pristine"
        self.pristine.mkdir()
        good = self.pristine / "good.jsonl"
        good.write_bytes(orjson.dumps(RECORDED) + b"\n")
        (self.pristine / "scenarios.jsonl").write_bytes(orjson.dumps(SCENARIO) + b"\n")
        with contextlib.chdir(self.pristine):
            import_scenarios(self.pristine / "scenarios.jsonl", taxonomy, LAYOUT)
            import_conversations(good, taxonomy, LAYOUT, target="kept")
            stage_recordings(good, taxonomy, LAYOUT, target="kept")
        (self.pristine / "notes.txt").write_text("a user's own file")
        self.reset()
        self.before = snapshot(self.root)
        self.changed = False

    def reset(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.copytree(self.pristine, self.root)

    def after(self, error: Exception | None) -> None:
        if error is None:
            self.reset()  # a successful import changes the data: start again from it
        else:
            assert snapshot(self.root) == self.before, f"a failed import changed files: {error}"


def _importers(tmp_path: Path, taxonomy: Taxonomy, examples: int, kind: str) -> None:
    work = Workdir(tmp_path, taxonomy)
    source = tmp_path / "input.jsonl"
    valid = [SCENARIO] if kind == "scenarios" else [RECORDED, PER_TEST]

    def check(data: bytes, target: str | None) -> None:
        source.write_bytes(data)
        if kind == "scenarios":
            run = lambda: import_scenarios(source, taxonomy, LAYOUT)  # noqa: E731
        elif kind == "conversations":
            run = lambda: import_conversations(source, taxonomy, LAYOUT, target=target)  # noqa: E731
        else:
            run = lambda: stage_recordings(  # noqa: E731
                source, taxonomy, LAYOUT, target=target, risk_ids=[SCENARIO["riskId"]]
            )
        work.after(expect_own_error(_in(work.root, run), str(source), "--"))

    fuzz(check, examples, data=jsonl(valid), target=st.sampled_from([None, "rec", "bad name!"]))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["scenarios", "conversations", "continue"])
def test_fuzzed_jsonl_imports(kind: str, tmp_path: Path, taxonomy: Taxonomy) -> None:
    _importers(tmp_path, taxonomy, QUICK, kind)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("kind", ["scenarios", "conversations", "continue"])
def test_fuzzed_jsonl_imports_many(kind: str, tmp_path: Path, taxonomy: Taxonomy) -> None:
    _importers(tmp_path, taxonomy, MANY, kind)


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as zf:
        warnings.simplefilter("ignore")  # a name twice: a zip may hold that, and is fuzzed
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def _zips() -> st.SearchStrategy[bytes]:
    """A reference run's per-test files in a .zip, or a file that is no zip at all."""
    member = st.tuples(
        st.sampled_from(["t1.json", "a/t2.json", "t3.jsonl", "readme.txt", "../up.json"]),
        encoded(mutated(PER_TEST)) | encoded(VALUES) | st.binary(max_size=30),
    )
    zipped = st.lists(member, max_size=3).map(_zip)
    broken = zipped.flatmap(lambda z: st.integers(0, max(len(z) - 1, 0)).map(lambda n: z[:n]))
    return st.one_of(zipped, zipped, broken, st.binary(max_size=60))


def _reference_zips(tmp_path: Path, taxonomy: Taxonomy, examples: int) -> None:
    work = Workdir(tmp_path, taxonomy)
    source = tmp_path / "reference-results.zip"

    def check(data: bytes, use: str) -> None:
        source.write_bytes(data)
        if use == "import":
            run: Any = lambda: import_conversations(source, taxonomy, LAYOUT, target="ref")  # noqa: E731
            work.after(expect_own_error(_in(work.root, run), str(source)))
        else:
            expect_own_error(lambda: aggregate_path(source, taxonomy), str(source))

    fuzz(check, examples, data=_zips(), use=st.sampled_from(["import", "aggregate"]))


@pytest.mark.timeout(120)
def test_fuzzed_reference_zips(tmp_path: Path, taxonomy: Taxonomy) -> None:
    _reference_zips(tmp_path, taxonomy, QUICK)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_fuzzed_reference_zips_many(tmp_path: Path, taxonomy: Taxonomy) -> None:
    _reference_zips(tmp_path, taxonomy, MANY)


def _aggregate_inputs(tmp_path: Path, taxonomy: Taxonomy, examples: int) -> None:
    folder = tmp_path / "per-test"
    judged = {**PER_TEST, "key": "k", "target": "t", "judges": []}
    one_file = st.tuples(
        st.sampled_from(["a.json", "b.jsonl", "c.jsonl"]),
        jsonl([PER_TEST, judged]) | encoded(mutated(PER_TEST)) | encoded(VALUES),
    )

    def check(files: list[tuple[str, bytes]]) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        for name, data in files:
            (folder / name).write_bytes(data)
        names = [str(folder / n) for n, _ in files] or [str(folder)]
        expect_own_error(lambda: aggregate_path(folder, taxonomy), *names, str(folder))

    fuzz(check, examples, files=st.lists(one_file, max_size=3, unique_by=lambda f: f[0]))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_fuzzed_aggregate_inputs(tmp_path: Path, taxonomy: Taxonomy) -> None:
    _aggregate_inputs(tmp_path, taxonomy, QUICK)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # DuckDB reads every input: about 20 min on a busy 2-core machine
def test_fuzzed_aggregate_inputs_many(tmp_path: Path, taxonomy: Taxonomy) -> None:
    _aggregate_inputs(tmp_path, taxonomy, MANY)


OVERLAY: dict[str, Any] = {
    "models": {
        "mock": {"provider": "mock"},
        "svc": {
            "provider": "http",
            "base_url": "http://127.0.0.1:9",
            "http": {"turn": {"url": "/chat", "reply": "a.b", "body": {"q": "{{ message }}"}}},
        },
    },
    "seed_model": "mock",
    "expand_model": ["mock"],
    "user_model": "mock",
    "judges": ["mock"],
    "targets": {"t": {"model": "mock", "prompts": ["default", "child"]}, "s": {"model": "svc"}},
    "grid": {
        "risks": ["violence_and_physical_harm"],
        "age_ranges": ["7to9"],
        "motivations": "all",
        "seeds_per_task": 2,
    },
    "concurrency": 4,
}


def _config_files(tmp_path: Path, examples: int) -> None:
    overlay = tmp_path / "overlay.yaml"
    texts = st.one_of(
        mutated(OVERLAY).map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
        mutated(OVERLAY).map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
        mutated(OVERLAY).map(json.dumps),  # JSON is YAML too
        VALUES.map(lambda d: yaml.safe_dump(d)),
        st.text(max_size=80),
        st.sampled_from(["a: &x [*x]", "a: !!python/object:os.system x", "a: 1\na: 2", "\t"]),
    )

    def check(text: str) -> None:
        overlay.write_text(text, errors="surrogatepass")
        run = lambda: load_run_config([overlay], workdir=REPO)  # noqa: E731
        expect_own_error(run, str(overlay), "overlay.yaml", "config.yaml")

    fuzz(check, examples, text=texts)


@pytest.mark.timeout(120)
def test_fuzzed_config_files(tmp_path: Path) -> None:
    _config_files(tmp_path, QUICK)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_fuzzed_config_files_many(tmp_path: Path) -> None:
    _config_files(tmp_path, MANY)


# --- what the fuzzing found, kept as plain examples ------------------------------------


@pytest.mark.timeout(60)
def test_found_by_fuzzing(tmp_path: Path, taxonomy: Taxonomy) -> None:
    work = Workdir(tmp_path, taxonomy)
    src = tmp_path / "in.jsonl"
    # a recorded conversation whose prompt is null: a TypeError, not a named field
    src.write_bytes(orjson.dumps({**RECORDED, "prompt": None}) + b"\n")
    err = expect_own_error(
        _in(work.root, lambda: import_conversations(src, taxonomy, LAYOUT)), str(src)
    )
    assert err is not None and f"{src}:1: field prompt" in str(err)
    work.after(err)
    # a .zip that is no zip: BadZipFile; a bad file in a good .zip named by the .zip
    bad = tmp_path / "results.zip"
    bad.write_bytes(b"PK\x03\x04 not a zip")
    err = expect_own_error(lambda: aggregate_path(bad, taxonomy), str(bad))
    assert err is not None and "not a .zip that can be read" in str(err)
    bad.write_bytes(_zip([("run/t1.json", b"null")]))
    err = expect_own_error(
        _in(work.root, lambda: import_conversations(bad, taxonomy, LAYOUT)), str(bad)
    )
    assert err is not None and str(err).startswith(f"{bad}:run/t1.json: ")
    # DuckDB's error quoting bytes that are not UTF-8: a UnicodeDecodeError
    folder = tmp_path / "agg"
    folder.mkdir()
    doc = _apply_count(PER_TEST, {"0\x80𐀀": False})
    (folder / "a.json").write_bytes(json.dumps(doc, ensure_ascii=False).encode())
    err = expect_own_error(lambda: aggregate_path(folder, taxonomy), str(folder / "a.json"))
    assert err is not None
    # YAML: a key that is a mapping, a character YAML refuses
    overlay = tmp_path / "o.yaml"
    for text in ("{{}}", "a: \x07"):
        overlay.write_text(text)
        err = expect_own_error(lambda: load_run_config([overlay], workdir=REPO), str(overlay))
        assert err is not None


def _apply_count(doc: dict[str, Any], value: Any) -> dict[str, Any]:
    out: dict[str, Any] = orjson.loads(orjson.dumps(doc))
    out["behaviorAssessment"]["anthropomorphism"]["occurrenceCount"] = value
    return out
