"""`kora annotate`'s uniform sample and review queues, label lines that say which queue
they came from (and lines naming none), and people's grades imported from a file."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from scipy.stats import chisquare

from kora.analysis.annotate import labels, queues, sample
from kora.analysis.annotate.server import build_app
from kora.analysis.records import TestRecord, criteria_of, judged, load_records
from kora.errors import InputError
from tests.reportdata import TAXONOMY, make_judgments, write_jsonl

pytestmark = pytest.mark.timeout(60)


@pytest.fixture()
def records(tmp_path: Path) -> list[TestRecord]:
    return judged(load_records([write_jsonl(tmp_path / "j.jsonl", make_judgments())]))


def test_every_conversation_is_equally_likely_in_the_sample(records: list[TestRecord]) -> None:
    """2,000 seeds, 10 of the 40 judged tests each: every test's count is binomial(2000,
    1/4); their spread is what chance gives (chi-square), and no test is left out."""
    counts = Counter(k for seed in range(2000) for k in sample.order(records, seed)[:10])
    assert len(counts) == 40 and sum(counts.values()) == 20_000
    assert chisquare(list(counts.values())).pvalue > 0.001


def test_the_sample_is_drawn_once(tmp_path: Path, records: list[TestRecord]) -> None:
    folder = tmp_path / "annotations"
    folder.mkdir()
    doc, note = sample.ensure(folder, records, 1)
    assert note.startswith("drew a uniform sample of 40 of the 40 judged conversations")
    assert doc["design"] == "uniform" and doc["keys"] == sample.order(records, 1)
    assert (
        doc["id"] == sample.sample_id(1, doc["keys"])
        and orjson.loads((folder / sample.SAMPLE).read_bytes()) == doc
    )
    assert sample.ensure(folder, records, 1) == (doc, "")  # the same, nothing said
    with pytest.raises(InputError, match="--seed 1"):
        sample.ensure(folder, records, 2)


@pytest.mark.parametrize(
    "found",
    [
        orjson.dumps({"size": 50, "seed": 1, "keys": ["k"]}),
        orjson.dumps({"design": "uniform", "seed": 1, "keys": ["k"]}),
        b'{"design": "uniform", "keys": ',  # cut short
    ],
)
def test_a_sample_kora_did_not_draw_is_refused_and_left_as_it_is(
    tmp_path: Path, records: list[TestRecord], found: bytes
) -> None:
    """A sample.json with no known design, or no size, or not JSON, is not one kora drew:
    drawing over it would lose it, and reading it would guess which grades count."""
    path = tmp_path / "sample.json"
    path.write_bytes(found)
    with pytest.raises(InputError, match=f"{path}: not a sample kora drew.*remove the file"):
        sample.ensure(tmp_path, records, 1)
    assert path.read_bytes() == found


def test_label_lines_say_their_queue_and_a_line_naming_none_is_a_review(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ana.jsonl"
    path.write_bytes(
        b'{"key": "k1", "criterion": "safety", "grade": "failing", "at": 1}\n'  # by hand
        b'{"key": "k2", "criterion": "safety", "grade": "adequate", "queue": "estimate", '
        b'"sample": "s1", "at": 2}\n'
        b'{"key": "k3", "criterion": "safety", "grade": "exemplary", "queue": "estimate", '
        b'"sample": "s0", "at": 3}\n'  # an earlier sample's
        b'{"key": "k2", "criterion": "safety", "grade": "failing", "queue": "judges", "at": 4}\n'
    )
    found = labels.lines(path)
    assert [labels.queue_of(a) for a in found] == ["review", "estimate", "estimate", "judges"]
    assert [labels.is_estimate(a, "s1") for a in found] == [False, True, False, False]
    assert labels.read(path, "s1") == {"k2": {"safety": {"grade": "adequate"}}}
    assert labels.read(path) == {  # agreement: everything, later over earlier
        "k1": {"safety": {"grade": "failing"}},
        "k2": {"safety": {"grade": "failing"}},
        "k3": {"safety": {"grade": "exemplary"}},
    }


def test_the_judges_queue_puts_the_widest_splits_first(records: list[TestRecord]) -> None:
    """judge-c grades safety failing where the others say adequate (scenario 2) and human
    redirection adequate for odd scenarios: those 8 tests first, then the 16 odd ones."""
    keys = queues.judges_disagree(records, seed=1)
    by_key = {r.key: r for r in records}
    index = [int(by_key[k].scenario_id.split("-")[2]) for k in keys]
    assert index[:8] == [2] * 8 and sorted(index[8:]) == [1] * 8 + [3] * 8
    assert keys == queues.judges_disagree(records, seed=1) != queues.judges_disagree(records, 2)
    one = [TestRecord(**{**r.__dict__, "judges": r.judges[:1]}) for r in records]
    with pytest.raises(InputError, match="one judge"):
        queues.judges_disagree(one, seed=1)


def test_the_reference_queue_and_the_risks_queue(records: list[TestRecord]) -> None:
    theirs = []  # the reference judge: the other end of the scale on cybersecurity, child
    for j in make_judgments():
        if j.assessment is not None and j.key.endswith(":child") and "cyber" in j.key:
            j.assessment.grade = "failing" if j.assessment.grade == "exemplary" else "exemplary"
        theirs.append(j)
    reference = {r.key: r for r in records_of(theirs)}
    keys = queues.reference_disagrees(records, list(reference.values()), seed=0)
    assert len(keys) == 10 and all("cyber" in k and k.endswith(":child") for k in keys)
    grades = ["failing", "adequate", "exemplary"]
    by_key = {r.key: r for r in records}
    gaps = [
        abs(grades.index(by_key[k].criteria["safety"].grade)
            - grades.index(reference[k].criteria["safety"].grade))
        for k in keys
    ]  # fmt: skip
    assert gaps == sorted(gaps, reverse=True) and gaps[0] == 2 and gaps[-1] == 1
    # people disagree with the judge on violence twice in 4, on cybersecurity once in 4
    viol = [r for r in records if r.risk.startswith("violence")][:4]
    cyber = [r for r in records if r.risk == "cybersecurity"][:4]

    def graded(rs: list[TestRecord], wrong: int) -> dict[str, Any]:
        out = {}
        for i, r in enumerate(rs):
            g = r.criteria["safety"].grade
            if i < wrong:
                g = "exemplary" if g == "failing" else "failing"
            out[r.key] = {"safety": {"grade": g}}
        return out

    people = {"ana": graded(viol, 2), "ben": graded(cyber, 1)}
    order = queues.risks_disagree(records, people, seed=0)
    risk_of = {r.key: r.risk for r in records}
    assert [risk_of[k] for k in order] == ["violence_and_physical_harm"] * 16 + [
        "cybersecurity"
    ] * 16
    assert not set(order) & {r.key for r in viol + cyber}  # nothing graded twice
    with pytest.raises(InputError, match="nobody has graded"):
        queues.risks_disagree(records, {}, seed=0)
    with pytest.raises(InputError, match="--reference"):
        queues.review("reference", records, 0, {})


def records_of(judgments: list[Any]) -> list[TestRecord]:
    from kora.analysis.report.summary import records_of as convert

    return convert(judgments)


KEYS = web.AppKey("keys", list)


def _get(app: Any, url: str) -> Any:
    from aiohttp.test_utils import TestClient, TestServer

    async def go() -> Any:
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            answer = {"key": keys[0], "criterion": "safety", "grade": "failing"}
            r = await client.post("/api/label", json=answer)
            assert r.status == 200
            return await (await client.get(url)).json()

    keys = app[KEYS]
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(go())).result()


def test_a_review_answer_is_marked_and_the_estimate_page_does_not_count_it(
    tmp_path: Path, records: list[TestRecord]
) -> None:
    keys = [r.key for r in records[:3]]
    path = tmp_path / "ana.jsonl"
    review = build_app(records, keys, path, "ana", "t", TAXONOMY, "judges")
    review[KEYS] = keys
    assert _get(review, "/api/labels") == {keys[0]: {"safety": {"grade": "failing"}}}
    assert orjson.loads(path.read_bytes())["queue"] == "judges"
    assert "sample" not in orjson.loads(path.read_bytes())
    estimate = build_app(records, keys, path, "ana", "t", TAXONOMY, "estimate", "s1")
    estimate[KEYS] = keys[1:]
    shown = _get(estimate, "/api/labels")  # its own answer only, not the review's
    assert shown == {keys[1]: {"safety": {"grade": "failing"}}}
    with pytest.raises(ValueError, match="sample"):
        build_app(records, keys, path, "ana", "t", TAXONOMY, "estimate")


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[TestRecord]:
    (tmp_path / ".kora").mkdir()  # a workspace, as a run leaves it
    monkeypatch.chdir(tmp_path)
    path = write_jsonl(tmp_path / "results/t/judgments/a/b/c.jsonl", make_judgments())
    return judged(load_records([path]))


def test_grades_import_from_a_file_into_each_persons_label_file(
    project: list[TestRecord], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kora.commands.main import main as kora_main

    first = sample.order(project, 1)[:3]
    grades = [
        {"key": first[0], "criterion": "safety", "grade": "failing", "annotator": "ben"},
        {"key": first[1], "criterion": "safety", "grade": "adequate"},
        {"key": first[1], "criterion": "humanRedirection", "grade": "adequate", "count": 1},
    ]
    src = tmp_path / "grades.jsonl"
    src.write_bytes(b"\n".join(orjson.dumps(g) for g in grades) + b"\n\n")
    assert kora_main(["annotate", "t", "--import", str(src), "--annotator", "ana"]) == 0
    folder = tmp_path / "results/t/annotations"
    doc = orjson.loads((folder / sample.SAMPLE).read_bytes())
    assert doc is not None
    ana = labels.lines(folder / "ana.jsonl")
    assert [(a["key"], a["queue"], a["sample"], a["source"]) for a in ana] == [
        (first[1], "estimate", doc["id"], "import")
    ] * 2
    assert labels.read(folder / "ben.jsonl", doc["id"]) == {
        first[0]: {"safety": {"grade": "failing"}}
    }
    assert "imported 3 grades of 2 conversations for ben, ana (estimate)" in capsys.readouterr().err
    # as review grades; one far into the sample: a warning for the estimate
    late = sample.order(project, 1)[30]
    src.write_bytes(orjson.dumps({"key": late, "criterion": "safety", "grade": "exemplary"}))
    assert kora_main(["annotate", "t", "--import", str(src), "--annotator", "cy"]) == 0
    assert "cover 1 of the sample's first 31" in capsys.readouterr().err
    assert kora_main(["annotate", "t", "--import", str(src), "--annotator", "dee",
                      "--queue", "review"]) == 0  # fmt: skip
    assert labels.queue_of(labels.lines(folder / "dee.jsonl")[0]) == "review"


def test_a_bad_import_names_its_lines_and_writes_nothing(
    project: list[TestRecord], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kora.commands.main import main as kora_main

    key = project[0].key
    src = tmp_path / "grades.jsonl"
    src.write_bytes(
        orjson.dumps({"key": key, "criterion": "safety", "grade": "great"}) + b"\n"
        + b"not json\n"
        + orjson.dumps({"key": key, "criterion": "safety", "grade": "failing",
                        "annotator": "../x"}) + b"\n"
    )  # fmt: skip

    def fails(*extra: str) -> str:
        assert kora_main(["annotate", "t", "--import", str(src), *extra]) == 2
        return capsys.readouterr().err

    assert re.search(
        r"grades.jsonl:1: unknown grade.*:2: .*:3: annotator", fails("--annotator", "a")
    )
    src.write_bytes(orjson.dumps({"key": "nope", "criterion": "safety", "grade": "failing"}))
    assert "'nope' is not a judged test of t" in fails("--annotator", "ana")
    src.write_bytes(orjson.dumps({"key": key, "criterion": "sycophancy", "grade": "failing"}))
    assert "not a criterion of this run" in fails("--annotator", "ana")
    src.write_bytes(orjson.dumps({"key": key, "criterion": "safety", "grade": "failing"}))
    assert "no annotator" in fails()
    assert "estimate or --queue review" in fails("--annotator", "a", "--queue", "risks")
    assert not list((tmp_path / "results/t/annotations").glob("*.jsonl"))


def test_the_command_offers_a_queue_without_what_this_person_graded(
    project: list[TestRecord], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kora.commands import annotate
    from kora.commands.main import main as kora_main

    served: dict[str, Any] = {}

    def fake_serve(args: Any, records: Any, keys: list[str], path: Path, sample_id: Any) -> int:
        served.update(keys=keys, path=path, sample=sample_id, queue=args.queue)
        return 0

    monkeypatch.setattr(annotate, "serve", fake_serve)
    assert kora_main(["annotate", "t", "--annotator", "ana", "--size", "5"]) == 0
    doc = orjson.loads((tmp_path / "results/t/annotations" / sample.SAMPLE).read_bytes())
    assert doc is not None
    assert served == {"keys": doc["keys"][:5], "path": served["path"], "sample": doc["id"],
                      "queue": "estimate"}  # fmt: skip
    whole = queues.judges_disagree(project, 1)
    for c in criteria_of(project):  # ana graded the first fully: it is not offered
        labels.append(served["path"], {"key": whole[0], "criterion": c, "grade": "adequate"})
    assert kora_main(["annotate", "t", "--annotator", "ana", "--queue", "judges"]) == 0
    assert served["keys"] == whole[1:] and served["sample"] is None
    assert kora_main(["annotate", "t"]) == 2
