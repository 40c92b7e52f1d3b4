"""`kora annotate` and `kora agreement`: the sample, the label files, the figures (checked
against values worked out by hand), and the grading page in Chromium with the server
killed and started again half-way."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kora.analysis.annotate import labels
from kora.analysis.annotate.sample import order
from kora.analysis.annotate.server import build_app
from kora.analysis.records import TestRecord, criteria_of, judged, load_records
from kora.analysis.stats.human import agreement, kappa
from kora.benchmarks.taxonomy import load_taxonomy
from kora.errors import InputError
from tests.fuzzing import MANY
from tests.helpers import MECHANISMS, REPO
from tests.reportdata import TAXONOMY, make_judgments, write_jsonl
from tests.test_report_browser import chromium, find_chromium  # noqa: F401


def draw(records: list[TestRecord], size: int, seed: int) -> list[str]:
    """A uniform random sample of `size` judged tests: the first of `order`."""
    return order(records, seed)[:size]


@pytest.fixture()
def records(tmp_path: Path) -> list[TestRecord]:
    path = write_jsonl(tmp_path / "judgments.jsonl", make_judgments())
    return judged(load_records([path]))


def test_the_sample_is_the_first_of_a_seeded_order_the_same_for_the_same_seed(
    records: list[TestRecord],
) -> None:
    a, b = draw(records, 12, 7), draw(records, 12, 7)
    assert a == b and len(a) == len(set(a)) == 12
    assert a == order(records, 7)[:12] and sorted(order(records, 7)) == sorted(
        r.key for r in records
    )
    assert draw(records, 12, 8) != a


def test_labels_merge_answers_and_survive_a_cut_last_line(tmp_path: Path) -> None:
    path = labels.label_file(tmp_path, "ana")
    labels.append(path, labels.check({"key": "k1", "criterion": "safety", "grade": "failing"}))
    labels.append(path, labels.check({"key": "k1", "criterion": "anthropomorphism",
                                      "grade": "adequate", "count": 2}))  # fmt: skip
    labels.append(path, labels.check({"key": "k1", "criterion": "safety", "grade": "adequate"}))
    with open(path, "ab") as f:
        f.write(b'{"key": "k2", "criterion": "saf')  # a crash mid-write
    assert labels.read(path) == {
        "k1": {
            "safety": {"grade": "adequate"},
            "anthropomorphism": {"grade": "adequate", "count": 2},
        }
    }
    for bad in ({"key": "k", "criterion": "nope"}, {"key": "k", "criterion": "safety",
                "grade": "great"}, {"key": "k", "criterion": "safety", "count": 1}):  # fmt: skip
        with pytest.raises(InputError, match=r"criterion|grade|count"):
            labels.check(bad)
    with pytest.raises(InputError, match="annotator"):
        labels.label_file(tmp_path, "../etc")


def test_weighted_kappa_and_agreement_by_hand() -> None:
    # judge f a e a, person f a a a: exact 3/4; quadratic weights (i-j)^2/4: observed
    # weighted disagreement 1/4 x 1/4 = 0.0625, expected 0.1875 -> kappa 1 - 1/3
    assert kappa(["failing", "adequate", "exemplary", "adequate"],
                 ["failing", "adequate", "adequate", "adequate"]) == pytest.approx(0.6667, abs=1e-4)  # fmt: skip
    assert kappa(["adequate"] * 3, ["adequate"] * 3) is None  # undefined, not 1 or 0


def _labels_like_judge(
    records: list[TestRecord], keys: list[str], flip: set[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in records:
        if r.key in keys:
            g = r.criteria["safety"].grade
            out[r.key] = {"safety": {"grade": "adequate" if r.key in flip and g != "adequate"
                                     else ("failing" if r.key in flip else g)}}  # fmt: skip
    return out


@pytest.mark.slow
def test_agreement_figures(records: list[TestRecord]) -> None:
    keys = draw(records, 20, 1)
    flip = set(keys[:5])
    people = {"ana": _labels_like_judge(records, keys, set()),
              "ben": _labels_like_judge(records, keys, flip)}  # fmt: skip
    doc = agreement(records, people)
    safety = doc["criteria"]["safety"]
    assert safety["pairs"]["judge vs ana"]["exact"] == 1.0
    assert (
        safety["pairs"]["judge vs ben"]["exact"] == 0.75
        and safety["pairs"]["judge vs ben"]["n"] == 20
    )
    low, high = safety["pairs"]["judge vs ben"]["exactCI"]
    assert low <= 0.75 <= high
    matrix = safety["pairs"]["judge vs ben"]["confusion"]["rows"]
    assert sum(map(sum, matrix)) == 20 and sum(matrix[i][i] for i in range(3)) == 15
    assert safety["alpha"] is not None and safety["alpha"] < 1
    assert doc["risks"] and doc["risks"][0]["disagree"] >= 1


class Served:
    """The annotate app on a loopback port, in a thread, stoppable like a killed server."""

    def __init__(
        self, records: list[TestRecord], keys: list[str], path: Path, taxonomy: Any = TAXONOMY
    ) -> None:
        from aiohttp import web

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.app = build_app(
            records, keys, path, "ana", "fixture-target", taxonomy, sample="sample-1"
        )
        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(self.app)
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(self.runner.setup())
            site = web.TCPSite(self.runner, "127.0.0.1", self.port)
            self.loop.run_until_complete(site.start())
            started.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        started.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def kill(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture()
def page(chromium: Any) -> Iterator[Any]:  # noqa: F811
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    context.close()
    assert not errors


@pytest.mark.slow
def test_grading_in_the_browser_with_a_kill_in_the_middle(
    page: Any, records: list[TestRecord], tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    keys = draw(records, 3, 2)
    path = labels.label_file(tmp_path / "annotations", "ana")
    by_key = {r.key: r for r in records}
    server = Served(records, keys, path)
    page.goto(server.url)
    expect(page.locator("#queue")).to_have_attribute("data-queue", "estimate")
    # nothing of the judges' grades or reasons on the page
    first = by_key[keys[0]]
    assert first.criteria["safety"].reasons[:40] not in page.content()
    # conversation 1 by keyboard: 3 grades, a count, then Tab through the criteria
    page.keyboard.press("1")  # safety: failing
    page.keyboard.press("Tab")
    page.keyboard.press("2")  # anthropomorphism: adequate
    page.keyboard.press("c")
    page.keyboard.press("4")  # its count
    page.keyboard.press("Tab")
    page.keyboard.press("3")  # epistemic humility: exemplary
    page.keyboard.press("Tab")
    page.keyboard.press("3")  # human redirection: exemplary
    expect(page.locator("#status")).to_have_text("saved")
    page.keyboard.press("n")
    # conversation 2 by mouse; the note typed in its box
    box = page.locator('[data-criterion="safety"]')
    box.locator('[data-grade="exemplary"]').click()
    expect(page.locator("#status")).to_have_text("saved")
    server.kill()  # killed before the rest of conversation 2 is graded
    page.locator('[data-criterion="anthropomorphism"] [data-grade="adequate"]').click()
    expect(page.locator("#status")).to_contain_text("NOT saved")
    server = Served(records, keys, path)
    page.goto(server.url)
    # the page starts at the first conversation not fully graded, with what was saved
    expect(page.locator("#position")).to_contain_text("conversation 2 of 3 · 1 graded")
    expect(page.locator('[data-criterion="safety"] [data-grade="exemplary"]')).to_have_class("on")
    for crit, grade in (("anthropomorphism", "adequate"), ("epistemicHumility", "adequate"),
                        ("humanRedirection", "failing")):  # fmt: skip
        page.locator(f'[data-criterion="{crit}"] [data-grade="{grade}"]').click()
        expect(page.locator("#status")).to_have_text("saved")
    note = page.locator('[data-criterion="safety"] textarea')
    note.fill("asks about <b>knives</b>")
    note.press("Tab")
    expect(page.locator("#status")).to_have_text("saved")
    page.locator("#next").click()
    for key in ("1", "Tab", "1", "Tab", "1", "Tab", "1"):
        page.keyboard.press(key)
    expect(page.locator("#position")).to_contain_text("3 graded")
    server.kill()

    saved = labels.read(path)
    assert saved[keys[0]] == {
        "safety": {"grade": "failing"},
        "anthropomorphism": {"grade": "adequate", "count": 4},
        "epistemicHumility": {"grade": "exemplary"},
        "humanRedirection": {"grade": "exemplary"},
    }
    assert saved[keys[1]]["safety"] == {"grade": "exemplary", "note": "asks about <b>knives</b>"}
    assert saved[keys[1]]["humanRedirection"] == {"grade": "failing"}
    assert all(v["grade"] == "failing" for v in saved[keys[2]].values())
    # the agreement with these labels, worked out from the judge's grades
    judge = {k: by_key[k].criteria["safety"].grade for k in keys}
    mine = {k: saved[k]["safety"]["grade"] for k in keys}
    exact = sum(judge[k] == mine[k] for k in keys) / 3
    doc = agreement(records, {"ana": saved})
    assert doc["criteria"]["safety"]["pairs"]["judge vs ana"]["exact"] == round(exact, 4)
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert len(lines) >= 12  # one line per answer


@pytest.mark.slow
def test_the_report_shows_the_agreement_once_there_is_one(
    records: list[TestRecord], tmp_path: Path
) -> None:
    from kora.analysis.report.pages import write_report
    from tests.reportdata import results_doc

    keys = draw(records, 20, 1)
    doc = agreement(records, {"ana": _labels_like_judge(records, keys, set(keys[:5]))})
    plain = write_report(records, results_doc(), tmp_path / "a.html", tmp_path / "a.json", TAXONOMY)
    assert "humanAgreement" not in plain
    assert 'id="human-agreement"' not in (tmp_path / "a.html").read_text()
    shown = write_report(records, results_doc(), tmp_path / "b.html", tmp_path / "b.json",
                         TAXONOMY, doc)  # fmt: skip
    page = (tmp_path / "b.html").read_text()
    assert shown["humanAgreement"]["criteria"]["safety"]["pairs"]["judge vs ana"]["exact"] == 0.75
    assert 'id="human-agreement"' in page and "judge vs ana" in page and "75.0%" in page


@pytest.mark.slow
def test_kora_agreement_with_people_and_the_reference_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kora.commands.main import main as kora_main

    (tmp_path / ".kora").mkdir()  # a workspace, as a run leaves it
    monkeypatch.chdir(tmp_path)
    judgments = make_judgments()
    write_jsonl(tmp_path / "results/t/judgments/a/b/c.jsonl", judgments)
    records = judged(load_records([tmp_path / "results/t/judgments/a/b/c.jsonl"]))
    keys = draw(records, 10, 1)
    path = labels.label_file(tmp_path / "results/t/annotations", "ana")
    for k, v in _labels_like_judge(records, keys, set()).items():
        labels.append(path, {"key": k, "criterion": "safety", **v["safety"]})
    # the reference run judged the same conversations, and differs on 4 of 40 tests
    ref = [j.model_copy(deep=True) for j in judgments]
    flipped = 0
    for j in ref:
        if j.assessment is not None and flipped < 4 and j.assessment.grade != "exemplary":
            j.assessment.grade = "exemplary"
            flipped += 1
    write_jsonl(tmp_path / "reference.jsonl", ref)
    assert kora_main(["agreement", "t", "--reference", "reference.jsonl"]) == 0
    out = capsys.readouterr().out
    doc = orjson.loads((tmp_path / "results/t/agreement.json").read_bytes())
    pairs = doc["criteria"]["safety"]["pairs"]
    assert pairs["judge vs ana"]["exact"] == 1.0 and pairs["judge vs ana"]["n"] == 10
    n = pairs["judge vs reference"]["n"]
    assert pairs["judge vs reference"]["exact"] == round((n - 4) / n, 4)
    assert "judge vs reference" in out and "written: results/t/agreement.json" in out


@pytest.mark.slow
def test_the_reference_runs_per_test_files_import_for_re_judging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder of per-test result files (one JSON each, grades included, as the
    reference run wrote them): their conversations are imported, their grades left."""
    from kora.commands.main import main as kora_main

    (tmp_path / ".kora").mkdir()  # a workspace, as a run leaves it
    monkeypatch.chdir(tmp_path)
    reference = tmp_path / "reference-run"
    reference.mkdir()
    kept = [j for j in make_judgments() if j.error is None]
    for i, j in enumerate(kept):
        (reference / f"test-{i}.json").write_bytes(orjson.dumps(j.model_dump(mode="json")))
    taxonomy = str(Path(__file__).resolve().parents[1] / "data" / "taxonomy")
    code = kora_main(["--taxonomy", taxonomy, "import-conversations", str(reference),
                      "--target", "ref"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    shards = sorted((tmp_path / "results/ref/conversations").rglob("*.jsonl"))
    imported = [orjson.loads(x) for f in shards for x in f.read_bytes().splitlines()]
    assert len(imported) == len(kept)
    by_key = {c["key"]: c for c in imported}
    for j in kept:
        assert by_key[j.key]["messages"] == [m.model_dump() for m in j.messages]
        assert "assessment" not in by_key[j.key]


# --- KORA v2: seven mechanisms, some of which can be not triggered ----------------------


V2_TAXONOMY = load_taxonomy(REPO / "data" / "taxonomy" / "v2")


@pytest.fixture()
def v2_records(tmp_path: Path) -> list[TestRecord]:
    """The fixture run as a v2 run: each test graded on the seven mechanisms, manipulative
    engagement never triggered (nobody tried to leave)."""
    lines = []
    for j in make_judgments():
        obj = j.model_dump(mode="json", exclude_none=True)
        obj.pop("behaviorAssessment", None)
        obj.pop("judges", None)
        obj["mechanismAssessment"] = {
            m: {"grade": "adequate", "reasons": "r" * 30, "occurrenceCount": 0,
                "notTriggered": m == "manipulativeEngagement"}
            for m in MECHANISMS
        }  # fmt: skip
        lines.append(orjson.dumps(obj))
    path = tmp_path / "v2.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return judged(load_records([path]))


def test_v2_labels_take_not_triggered_for_a_mechanism_only(tmp_path: Path) -> None:
    path = labels.label_file(tmp_path, "ana")
    labels.append(path, labels.check({"key": "k", "criterion": "fictionalFramingBypass",
                                      "grade": "adequate"}))  # fmt: skip
    labels.append(path, labels.check({"key": "k", "criterion": "fictionalFramingBypass",
                                      "notTriggered": True}))  # fmt: skip
    assert labels.read(path)["k"]["fictionalFramingBypass"] == {
        "grade": "adequate",
        "notTriggered": True,
    }
    with pytest.raises(InputError, match="safety is always graded"):
        labels.check({"key": "k", "criterion": "safety", "notTriggered": True})
    with pytest.raises(InputError, match="true or false"):
        labels.check({"key": "k", "criterion": "sycophancy", "notTriggered": "yes"})


@pytest.mark.slow
def test_v2_agreement_covers_the_mechanisms_and_whether_they_applied(
    v2_records: list[TestRecord],
) -> None:
    assert criteria_of(v2_records) == ("safety", *MECHANISMS)
    keys = [r.key for r in v2_records[:4]]
    ana = {
        k: {
            "safety": {"grade": "adequate"},
            "sycophancy": {"grade": "adequate"},
            # ana finds the mechanism triggered twice where the judges did not
            "manipulativeEngagement": {"grade": "failing"} if i < 2 else {"notTriggered": True},
        }
        for i, k in enumerate(keys)
    }
    doc = agreement(v2_records, {"ana": ana})
    assert list(doc["criteria"]) == ["safety", *MECHANISMS]
    assert doc["criteria"]["sycophancy"]["pairs"]["judge vs ana"]["exact"] == 1.0
    me = doc["criteria"]["manipulativeEngagement"]
    assert me["triggered"]["judge vs ana"] == {"n": 4, "exact": 0.5}
    assert "judge vs ana" not in me["pairs"]  # never graded by both: no grade figures


def test_v2_grading_in_the_browser(page: Any, v2_records: list[TestRecord], tmp_path: Path) -> None:
    from playwright.sync_api import expect

    keys = [r.key for r in v2_records[:2]]
    path = labels.label_file(tmp_path / "annotations", "ana")
    server = Served(v2_records, keys, path, V2_TAXONOMY)
    try:
        page.goto(server.url)
        crits = page.locator(".crit")
        expect(crits).to_have_count(8)
        # only the mechanisms with a precondition can be not triggered
        expect(page.locator('[data-criterion="humanRedirection"] [data-grade="notTriggered"]')
               ).to_have_count(1)  # fmt: skip
        expect(page.locator('[data-criterion="sycophancy"] [data-grade="notTriggered"]')
               ).to_have_count(0)  # fmt: skip
        page.keyboard.press("2")  # safety
        for crit in MECHANISMS:
            page.keyboard.press("Tab")
            page.keyboard.press("4" if crit == "manipulativeEngagement" else "3")
            expect(page.locator("#status")).to_have_text("saved")
        expect(page.locator("#position")).to_contain_text("1 graded")
    finally:
        server.kill()
    saved = labels.read(path)[keys[0]]
    assert saved["manipulativeEngagement"] == {"notTriggered": True}
    assert saved["sycophancy"] == {"grade": "exemplary"}
    assert len(saved) == 8


# --- the grading page answers only its own page -----------------------------------------


def _exchange(app: Any, steps: Any) -> Any:
    """`steps(client)` against the app on a loopback port (aiohttp's test server), in a
    thread of its own: Playwright's browser, open for the module, holds this thread's loop."""
    from concurrent.futures import ThreadPoolExecutor

    from aiohttp.test_utils import TestClient, TestServer

    async def go() -> Any:
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            return await steps(client)

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(go())).result()


ANSWER = {"criterion": "safety", "grade": "failing"}


@pytest.mark.timeout(60)
def test_requests_from_other_sites_are_refused_and_never_reach_the_label_file(
    records: list[TestRecord], tmp_path: Path
) -> None:
    keys = draw(records, 3, 2)
    path = labels.label_file(tmp_path / "annotations", "ana")
    app = build_app(records, keys, path, "ana", "fixture-target", TAXONOMY, sample="s")
    body = orjson.dumps({"key": keys[0], **ANSWER})

    async def steps(client: Any) -> dict[str, tuple[int, str]]:
        own = f"http://127.0.0.1:{client.port}"
        json_type = {"Content-Type": "application/json"}
        asks: dict[str, tuple[str, str, dict[str, Any]]] = {
            # a page of another site posting, as a form or fetch() in no-cors mode can
            "foreign origin": ("POST", "/api/label", {"data": body, "headers": {
                **json_type, "Origin": "http://evil.example"}}),
            "null origin": ("POST", "/api/label", {"data": body, "headers": {
                **json_type, "Origin": "null"}}),
            "another port": ("POST", "/api/label", {"data": body, "headers": {
                **json_type, "Origin": "http://127.0.0.1:1"}}),
            # the simple request that needs no preflight: text/plain
            "text/plain": ("POST", "/api/label", {"data": body, "headers": {
                "Content-Type": "text/plain", "Origin": own}}),
            "no type": ("POST", "/api/label", {"data": body, "headers": {"Origin": own}}),
            # a DNS-rebinding name for 127.0.0.1: same origin for the browser, wrong Host
            "foreign host": ("POST", "/api/label", {"data": body, "headers": {
                **json_type, "Host": f"evil.example:{client.port}",
                "Origin": f"http://evil.example:{client.port}"}}),
            "foreign host, no origin": ("POST", "/api/label", {"data": body, "headers": {
                **json_type, "Host": "evil.example"}}),
            # ... which would also read the page and the labels
            "page, foreign host": ("GET", "/", {"headers": {"Host": "evil.example"}}),
            "labels, foreign host": ("GET", "/api/labels", {"headers": {
                "Host": f"evil.example:{client.port}"}}),
            "labels, foreign origin": ("GET", "/api/labels", {"headers": {
                "Origin": "http://evil.example"}}),
            # JSON that is not an answer's object
            "array": ("POST", "/api/label", {"data": b"[1, 2]", "headers": json_type}),
            "number": ("POST", "/api/label", {"data": b"12", "headers": json_type}),
            "string": ("POST", "/api/label", {"data": b'"safety"', "headers": json_type}),
            "null": ("POST", "/api/label", {"data": b"null", "headers": json_type}),
        }  # fmt: skip
        out = {}
        for name, (method, url, kw) in asks.items():
            r = await client.request(method, url, **kw)
            out[name] = (r.status, await r.text())
        # the page's own requests, as Chromium sends them
        for name, (method, url, kw) in {
            "own page": ("GET", "/", {}),
            "own page, localhost": ("GET", "/", {"headers": {"Host": f"localhost:{client.port}"}}),
            "own answer": ("POST", "/api/label", {"data": body, "headers": {
                "Content-Type": "application/json; charset=UTF-8", "Origin": own}}),
            "own labels": ("GET", "/api/labels", {}),
        }.items():  # fmt: skip
            r = await client.request(method, url, **kw)
            out[name] = (r.status, await r.text())
        return out

    answers = _exchange(app, steps)
    status = {name: s for name, (s, _) in answers.items()}
    assert status == {
        "foreign origin": 403,
        "null origin": 403,
        "another port": 403,
        "text/plain": 415,
        "no type": 415,
        "foreign host": 421,
        "foreign host, no origin": 421,
        "page, foreign host": 421,
        "labels, foreign host": 421,
        "labels, foreign origin": 403,
        "array": 400,
        "number": 400,
        "string": 400,
        "null": 400,
        "own page": 200,
        "own page, localhost": 200,
        "own answer": 200,
        "own labels": 200,
    }, answers
    # what was refused says why, and nothing of it reached the file: the one line there
    # is the page's own answer
    assert "evil.example" in answers["foreign host"][1]
    assert "application/json" in answers["text/plain"][1]
    assert "object" in answers["array"][1]
    assert "fixture-target" not in answers["page, foreign host"][1]
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert [{k: v for k, v in x.items() if k != "at"} for x in lines] == [
        {"key": keys[0], **ANSWER, "queue": "estimate", "sample": "s"}
    ]
    assert orjson.loads(answers["own labels"][1]) == {keys[0]: {"safety": {"grade": "failing"}}}


# --- fuzzing the answers: whatever is posted, 200 or 4xx, and only valid lines ----------


FIELDS = ("key", "criterion", "grade", "count", "notTriggered", "note")
RAW = [  # bodies no JSON encoder writes
    b"",
    b"\xff\xfe{}",
    b'"\\ud800"',
    b'{"key": "\\udfff", "criterion": "safety"}',
    b"1e400",
    b'{"key": "k", "criterion": "safety", "count": 1e400}',
    b"[" * 3000 + b"]" * 3000,
    b'{"key": 1',
    b'{"criterion": "safety", "criterion": "grade"}',
]


# what a client may say it sends: JSON most often, the simple requests' types, nothing
CONTENT_TYPES = [
    "application/json",
    "application/json",
    "application/json; charset=utf-8",
    "Application/JSON",
    "text/plain",
    "application/x-www-form-urlencoded",
    None,
]


def _bodies(keys: list[str], criteria: tuple[str, ...]) -> Any:
    """Posted bodies: JSON documents of any shape, answers with the right fields holding
    right or wrong values, and bytes that are no JSON at all."""
    import json

    from hypothesis import strategies as st

    from kora.benchmarks.schemas import GRADES

    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
        st.sampled_from([*keys, *criteria, *GRADES, "", 0, 99, 100, -1, 1.0, 2**64]),
    )
    values = st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )
    any_object = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=10), values)
    answer = st.fixed_dictionaries(
        {"key": st.sampled_from(keys) | values, "criterion": st.sampled_from(criteria) | values},
        optional={
            "grade": st.sampled_from(GRADES) | values,
            "count": st.integers(0, 99) | values,
            "notTriggered": st.booleans() | values,
            "note": st.text() | values,
        },
    )
    valid = st.fixed_dictionaries(
        {"key": st.sampled_from(keys), "criterion": st.sampled_from(criteria)},
        optional={"grade": st.sampled_from(GRADES), "note": st.text()},
    )
    docs = st.one_of(valid, answer, answer, any_object, values)
    encoded = st.builds(
        lambda doc, ascii: json.dumps(doc, ensure_ascii=ascii).encode(), docs, st.booleans()
    )
    return st.one_of(encoded, encoded, encoded, st.sampled_from(RAW), st.binary(max_size=40))


def _fuzz(records: list[TestRecord], tmp_path: Path, examples: int) -> None:
    import httpx
    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    keys = draw(records, 4, 3)
    criteria = criteria_of(records)
    path = labels.label_file(tmp_path / "annotations", "ana")
    server = Served(records, keys, path)
    own = server.url.rstrip("/")
    seen = {"bytes": 0, "ok": 0}

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        body=_bodies(keys, criteria),
        content_type=st.sampled_from(CONTENT_TYPES),
        origin=st.sampled_from([None, own, own, "http://evil.example", "null"]),
    )
    @example(  # always tried first: the page's own answer, accepted
        body=orjson.dumps({"key": keys[0], **ANSWER}), content_type="application/json", origin=own
    )
    def post(body: bytes, content_type: str | None, origin: str | None) -> None:
        headers = {k: v for k, v in (("Content-Type", content_type), ("Origin", origin)) if v}
        r = client.post("/api/label", content=body, headers=headers)
        assert r.status_code == 200 or 400 <= r.status_code < 500, (r.status_code, r.text)
        data = path.read_bytes() if path.exists() else b""
        new, seen["bytes"] = data[seen["bytes"] :], len(data)
        lines = new.splitlines()
        if r.status_code != 200:
            assert lines == [], (body, r.status_code)
            return
        # accepted: from the page's own origin, as JSON; exactly one line, a valid answer
        assert origin in (None, own) and "json" in str(content_type).lower()
        assert new.endswith(b"\n") and len(lines) == 1
        line = orjson.loads(lines[0])
        assert (line["queue"], line["sample"]) == ("estimate", "sample-1")  # the server's
        answer = {k: v for k, v in line.items() if k not in ("at", "queue", "sample")}
        assert labels.check(answer) == answer == labels.check(orjson.loads(body))
        assert answer["key"] in keys and answer["criterion"] in criteria
        seen["ok"] += 1

    try:
        with httpx.Client(base_url=server.url, timeout=10) as client:
            post()
            # the server still serves the page, and what was saved reads back
            assert client.get("/").status_code == 200
            assert client.get("/api/labels").json() == labels.read(path)
    finally:
        server.kill()
    print(f"fuzzed: {seen['ok']} of {examples} answers accepted")
    assert seen["ok"] > 0  # the answers reach the file, not only the refusals


@pytest.mark.timeout(120)
def test_fuzzed_answers_get_200_or_4xx_and_only_valid_lines(
    records: list[TestRecord], tmp_path: Path
) -> None:
    _fuzz(records, tmp_path, 200)


@pytest.mark.slow
@pytest.mark.timeout(600)  # MANY (10,000) examples: about 50 s on one core
def test_fuzzed_answers_many(records: list[TestRecord], tmp_path: Path) -> None:
    _fuzz(records, tmp_path, MANY)
