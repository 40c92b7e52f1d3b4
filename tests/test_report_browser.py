"""report.html and leaderboard.html in a real browser: Debian's headless Chromium, driven by
Playwright.

Each test loads a page from a file and fails on any console message, uncaught exception
or network request (the pages are self-contained). They check what a reader sees: the
figures where they belong, the conversation browser's filters and rows, hostile content
shown as text, and the interactions (heat-map cells, section links, a narrow screen).

Chromium is looked up as $KORA_CHROMIUM, `chromium`, `chromium-browser`, `google-chrome`.
Without it (or without the playwright package) the tests are skipped, except under CI
(env CI set), where they fail.
"""

from __future__ import annotations

import base64
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from kora.analysis.report import browser
from kora.analysis.report.leaderboard import build_leaderboard
from kora.analysis.report.pages import render_leaderboard, write_report
from kora.analysis.report.summary import records_of
from kora.analysis.stats.rates import wilson
from tests.chromium import CHROMIUM_ARGS, chromium_path
from tests.pagetext import listing_block
from tests.reportdata import (
    HOSTILE,
    TAXONOMY,
    hostile_records,
    hostile_results,
    make_judgments,
    results_doc,
    scores_of,
    with_reply,
)


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(message: str) -> None:
    if _ci():
        pytest.fail(f"{message}; CI is set, so the browser tests may not be skipped")
    pytest.skip(message)


def find_chromium() -> str:
    found, where = chromium_path()
    if not found:
        _unavailable(f"headless Chromium not found ({where}; apt-get install -y chromium)")
    return str(found)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium for the module (Playwright gives it a fresh profile)."""
    binary = find_chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=binary, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class Tab:
    """A page in a fresh browser context, with everything it said and asked for."""

    page: Any
    messages: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def open(self, url: str) -> None:
        """Load the page, and wait until its packed data is open (a few tasks after `load`):
        a report's conversation texts searchable, a leaderboard's side-by-side view ready."""
        from playwright.sync_api import expect

        self.page.goto(url)
        self.page.wait_for_load_state("load")
        if self.page.locator("#kora-browser").count():
            expect(self.page.locator("#kora-browser")).to_have_attribute("data-text", "loaded")
        if self.page.locator("#kora-compare").count():
            expect(self.page.locator("#kora-compare")).to_have_attribute("data-ready", "1")

    def quiet(self) -> None:
        """No console message, uncaught exception or network request so far."""
        assert self.messages == [], "console:\n" + "\n".join(self.messages)
        assert self.requests == [], "network requests:\n" + "\n".join(self.requests)

    def unique_ids(self) -> None:
        ids = self.page.evaluate("Array.from(document.querySelectorAll('[id]'), e => e.id)")
        assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)

    def texts(self, selector: str) -> list[str]:
        return list(self.page.locator(selector).all_text_contents())

    def text(self, selector: str) -> str:
        return " ".join(str(self.page.locator(selector).text_content()).split())

    def matches(self) -> int:
        return int(self.page.get_attribute("#kora-count", "data-matches"))

    def row_count(self) -> int:
        return int(self.page.locator("#kora-tests tr.row").count())

    def shows(self, n: int) -> None:
        """Wait for the browser to show n conversations: a link changes the address, and
        the page applies it when the hashchange event comes, after the click returns."""
        from playwright.sync_api import expect

        expect(self.page.locator("#kora-count")).to_have_attribute("data-matches", str(n))
        assert self.row_count() == min(n, 50)

    def settle(self) -> None:
        """Let events already queued (a hashchange) run."""
        self.page.evaluate("new Promise(done => setTimeout(done, 50))")


@pytest.fixture()
def tab(chromium: Any) -> Iterator[Tab]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)  # a local page: anything slower is a failure
    page = context.new_page()
    t = Tab(page)
    page.on("console", lambda m: t.messages.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: t.messages.append(f"uncaught: {e}"))

    def no_network(route: Any) -> None:
        t.requests.append(route.request.url)
        route.abort()

    context.route(lambda url: not url.startswith(("file:", "data:", "about:")), no_network)
    yield t
    context.close()


@pytest.fixture()
def report_url(tmp_path: Path) -> str:
    html_path = tmp_path / "report.html"
    write_report(make_judgments(), results_doc(), html_path, tmp_path / "summary.json", TAXONOMY)
    return html_path.as_uri()


def test_console_errors_and_requests_are_caught(tab: Tab, tmp_path: Path) -> None:
    """The checks below are not vacuous: a page that throws or fetches is seen doing it."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<html><body><script>fetch('http://127.0.0.1:59999/x').catch(function () {});"
        "throw new Error('kora-test-boom')</script></body></html>"
    )
    tab.open(bad.as_uri())
    tab.page.wait_for_timeout(200)
    assert any("kora-test-boom" in m for m in tab.messages), tab.messages
    assert tab.requests == ["http://127.0.0.1:59999/x"]


def test_report_loads_and_shows_the_figures(tab: Tab, report_url: str) -> None:
    tab.open(report_url)
    tab.quiet()
    tab.unique_ids()
    # the mock note, at the top
    note = tab.page.locator("#mock-note")
    assert note.is_visible() and "Mock run." in str(note.text_content())
    assert note.bounding_box()["y"] < tab.page.locator("#overview").bounding_box()["y"]
    # headline: 8 of 40 failing, with its Wilson interval
    low, high = wilson(8, 40)
    assert tab.text("#headline-failing .value") == "20.0%"
    assert tab.text("#headline-failing .ci") == (
        f"95% CI {100 * low:.1f}%–{100 * high:.1f}% · 8 of 40"
    )
    assert tab.text("#headline-exemplary .value") == "60.0%"
    # the violence row of the safety table and its heat-map cells (3 of 10 per age range)
    violence = tab.page.locator("#safety-by-risk tr", has_text="Violence & Physical Harm")
    assert tab.page.locator("#safety-by-risk td.failing").count() == 5
    assert str(violence.locator("td.failing").text_content()).startswith("30.0%")
    heat = tab.page.locator("#heatmap-table tr.risk", has_text="Violence & Physical Harm")
    cells = [" ".join(c.split()) for c in heat.locator("td.cell").all_text_contents()]
    assert [c.split(" ")[0] for c in cells] == ["30.0%3/10", "30.0%3/10", "30.0%6/20"]
    # judges: three of them, and NO SIGNAL for anthropomorphism
    assert tab.text("#judges .meta").startswith("3 judges on 40 tests")
    assert "NO SIGNAL" in tab.text('#criteria-table tr[data-criterion="anthropomorphism"]')
    assert "NO SIGNAL" not in tab.text('#criteria-table tr[data-criterion="safety"]')
    # the conversation browser rendered every test (41 < one page of 50)
    assert tab.text("#kora-count") == "Showing 1–41 of 41 conversations (41 in all)"
    assert tab.row_count() == 41


FILTERS = [
    ("grade=failing", 8),
    ("grade=failing&risk=cybersecurity", 2),
    ("grade=error", 1),
    ("age=7to9&prompt=child", 11),
    ("crit=epistemicHumility&grade=failing", 8),
    ("disagree=1", 8),
    ("q=" + quote("Scenario cybersecurity 13to17 #4"), 2),
    ("risk=no-such-risk&grade=nonsense", 41),
]


def test_filters_from_the_address(tab: Tab, report_url: str) -> None:
    for fragment, expected in FILTERS:
        tab.open("about:blank")
        tab.open(f"{report_url}#{fragment}")
        assert (tab.matches(), tab.row_count()) == (expected, expected), fragment
    tab.quiet()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_malformed_address_is_ignored_and_the_page_keeps_working(
    tab: Tab, report_url: str
) -> None:
    """`#%` (and any cut %-escape) is not a valid URI component: decodeURIComponent throws
    URIError. The page ignores what it cannot read and keeps the rest of the address."""
    tab.open(f"{report_url}#%")
    tab.quiet()
    assert tab.row_count() == 41
    tab.page.select_option("#f-grade", "failing")
    assert tab.matches() == 8

    # a view's address with one unreadable part: the readable ones still apply
    def shown(fragment: str) -> tuple[int, int]:
        tab.open("about:blank")
        tab.open(f"{report_url}#{fragment}")
        return tab.matches(), tab.row_count()

    for bad, good in (("grade=failing&q=%E0%A4%A", "grade=failing"), ("%zz", ""),
                      ("risk=cybersecurity&%=1", "risk=cybersecurity"), ("q=100%", "")):  # fmt: skip
        assert shown(bad) == shown(good), bad
    assert shown("grade=failing&q=%E0%A4%A") == (8, 8)
    assert shown("risk=cybersecurity&%=1")[0] < 41
    # typed into the address of an open page (a hashchange), then a good one
    from playwright.sync_api import expect

    tab.page.evaluate("location.hash = '#grade=exemplary&q=%'")
    expect(tab.page.locator("#f-grade")).to_have_value("exemplary")
    assert tab.page.evaluate("location.hash") == "#grade=exemplary"  # the bad part dropped
    tab.page.evaluate("location.hash = '#grade=failing'")
    tab.shows(8)
    tab.quiet()


def test_filters_from_the_controls(tab: Tab, report_url: str) -> None:
    tab.open(report_url)
    tab.page.select_option("#f-grade", "failing")
    assert tab.matches() == 8
    tab.page.select_option("#f-risk", "cybersecurity")
    assert tab.matches() == 2
    address = tab.page.evaluate("location.href")
    assert "grade=failing" in address and "risk=cybersecurity" in address
    tab.page.select_option("#f-grade", "")
    tab.page.fill("#f-q", "#4")
    assert tab.matches() == 4
    tab.quiet()


def test_search_text_indexed_after_the_first_view_finds_transcript_words(
    tab: Tab, report_url: str
) -> None:
    # the page builds the search text in slices after its first view; a search then
    # finds words that are only in the transcripts, as one typed before would
    judgments = make_judgments()
    word = "onerror"  # in some replies only
    expected = sum(any(word in m.content.lower() for m in j.messages) for j in judgments)
    assert 0 < expected < len(judgments)
    from playwright.sync_api import expect

    tab.open(report_url)
    expect(tab.page.locator("#kora-browser")).to_have_attribute("data-text", "loaded")
    tab.page.fill("#f-q", word.upper())
    assert tab.matches() == expected
    tab.quiet()


def test_the_list_is_drawn_before_the_browser_opens_the_texts(tab: Tab, report_url: str) -> None:
    # what keeps a 12,000-conversation page's first view quick (bench/report_browser.py):
    # the list's rows exist while the texts are still packed
    tab.page.add_init_script(
        """new MutationObserver((_, mo) => {
             const root = document.getElementById("kora-browser");
             if (root && root.getAttribute("data-rendered") !== "0") {
               window.__rows = document.querySelectorAll("#kora-tests tr.row").length;
               window.__textThen = root.getAttribute("data-text");
               mo.disconnect();
             }
           }).observe(document, {childList: true, subtree: true, attributes: true});"""
    )
    tab.open(report_url)
    assert tab.page.evaluate("window.__rows") == 41
    assert tab.page.evaluate("window.__textThen") == "packed"
    # and once they are open, an opened conversation has its transcript
    from playwright.sync_api import expect

    expect(tab.page.locator("#kora-browser")).to_have_attribute("data-text", "loaded")
    tab.page.locator("#kora-tests tr.row").first.click()
    assert tab.page.locator("#kora-tests tr.detail .msg").count() >= 2
    tab.quiet()


def test_open_conversation_shows_transcript_and_every_judge(tab: Tab, report_url: str) -> None:
    judgments = make_judgments()
    target = next(j for j in judgments if "cybersecurity:7to9" in j.key and "-0003-" in j.key)
    tab.open(f"{report_url}#open={quote(target.key)}")
    tab.quiet()
    detail = tab.page.locator("#kora-tests tr.detail")
    assert detail.count() == 1
    reasons = [" ".join(r.split()) for r in detail.locator(".verdict .reasons").all_text_contents()]
    for judge in ("judge-a", "judge-b", "judge-c"):
        assert any(r.startswith(f"{judge} on safety: exemplary") for r in reasons)
    assert detail.locator(".verdict h4").all_text_contents() == ["Combined", *JUDGE_NAMES]
    messages = detail.locator(".msg").all_text_contents()
    assert messages[0] == "CHILD" + "how do i do the thing i saw on youtube"
    # scenario and transcript text with markup in it stay text
    assert messages[1].endswith("<img src=x onerror=alert(1)>")
    assert tab.page.locator("img").count() == 0
    assert tab.page.evaluate("window.__pwned") is None


JUDGE_NAMES = ["judge-a", "judge-b", "judge-c"]


def test_texts_in_several_blocks_each_reach_their_conversation(
    tab: Tab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large run's texts are packed in blocks of TEXT_CHUNK tests; here blocks of 6, so
    the fixture's 41 make 7, and a search and an opened row find each test's own texts."""
    monkeypatch.setattr(browser, "TEXT_CHUNK", 6)
    html_path = tmp_path / "report.html"
    write_report(make_judgments(), results_doc(), html_path, None, TAXONOMY)
    assert html_path.read_text(encoding="utf-8").count('class="kora-text"') == 7
    tab.open(html_path.as_uri())
    keys = tab.page.locator("#kora-tests tr.row").evaluate_all("rs => rs.map(r => r.dataset.key)")
    failed = {j.key for j in make_judgments() if j.error}
    for key in (keys[0], keys[17], keys[-1]):
        if key in failed:
            continue
        tab.page.fill("#f-q", key)  # the first reply names its test's key
        assert tab.matches() == 1, key
        tab.page.locator("#kora-tests tr.row").click()
        detail = tab.page.locator("#kora-tests tr.detail")
        assert str(detail.locator(".msg").nth(1).text_content()).startswith("AIReply to " + key)
        reasons = detail.locator(".verdict .reasons").all_text_contents()
        assert reasons[0].startswith("judge-a on safety"), reasons
        assert str(detail.locator("dd").nth(1).text_content()) == key
    # a link to the last one opens it, with its texts from the last block
    tab.open("about:blank")
    tab.open(f"{html_path.as_uri()}#open={quote(keys[-1])}")
    detail = tab.page.locator("#kora-tests tr.detail")
    assert str(detail.locator("dd").nth(1).text_content()) == keys[-1]
    assert detail.locator(".msg").count() >= 2 or keys[-1] in failed
    tab.quiet()


def test_one_judge_shows_its_grades_and_reasons(tab: Tab, tmp_path: Path) -> None:
    # a run's one judge comes without its grades in the data (they are the test's own)
    one = [j.model_copy(update={"judges": j.judges[:1]}) for j in make_judgments()]
    html_path = tmp_path / "report.html"
    write_report(one, results_doc(), html_path, None, TAXONOMY)
    tab.open(f"{html_path.as_uri()}#grade=failing&risk=cybersecurity")
    row = tab.page.locator("#kora-tests tr.row").first
    grades = row.locator(".badge").all_text_contents()
    row.click()
    verdict = tab.page.locator("#kora-tests tr.detail .verdict")
    assert verdict.count() == 1 and verdict.locator("h4").text_content() == "judge-a"
    assert verdict.locator(".badge").all_text_contents() == grades
    reasons = verdict.locator(".reasons").all_text_contents()
    assert len(reasons) == 4 and reasons[0].startswith("judge-a on safety: failing")
    tab.quiet()


def test_a_browser_without_base64_decoding_of_its_own_reads_the_page(
    tab: Tab, report_url: str
) -> None:
    # Uint8Array.fromBase64 came to browsers in 2025; before it, the page decodes with atob
    tab.page.add_init_script("delete Uint8Array.fromBase64")
    tab.open(report_url + "#grade=failing&risk=cybersecurity")
    assert tab.matches() == 2
    tab.page.locator("#kora-tests tr.row").first.click()
    assert tab.page.locator("#kora-tests tr.detail .verdict .reasons").count() == 12
    tab.quiet()


def test_a_browser_that_cannot_unpack_the_page_says_so(tab: Tab, report_url: str) -> None:
    # the page's xz decoder is WebAssembly
    tab.page.add_init_script("delete window.WebAssembly")
    tab.page.goto(report_url)
    from playwright.sync_api import expect

    expect(tab.page.locator("#kora-unreadable")).to_contain_text("browser of 2023 or later")
    # the figures, written in the page itself, are all there
    assert tab.text("#headline-failing .value") == "20.0%"
    assert tab.page.locator("#heatmap-table td.cell a").count() > 0
    tab.quiet()


def test_a_damaged_page_says_so_instead_of_showing_wrong_data(tab: Tab, tmp_path: Path) -> None:
    """A byte changed in the packed list (a page cut or altered on its way): the decoder's
    checksum refuses it, and the page says its data could not be opened."""
    html_path = tmp_path / "report.html"
    write_report(make_judgments(), results_doc(), html_path, None, TAXONOMY)
    page = html_path.read_text(encoding="utf-8")
    block = listing_block(page)
    raw = bytearray(base64.b64decode(block))
    raw[len(raw) // 2] ^= 0x01
    html_path.write_text(
        page.replace(block, base64.b64encode(bytes(raw)).decode()), encoding="utf-8"
    )
    tab.page.goto(html_path.as_uri())
    from playwright.sync_api import expect

    expect(tab.page.locator("#kora-unreadable")).to_contain_text("could not open")
    assert tab.page.locator("#kora-tests tr.row").count() == 0
    assert tab.text("#headline-failing .value") == "20.0%"


def test_placeholder_in_a_reply_keeps_every_row(tab: Tab, tmp_path: Path) -> None:
    html_path = tmp_path / "hostile.html"
    judgments = with_reply(make_judgments(), "hide me: {{KORA_BODY}}")
    write_report(judgments, results_doc(), html_path, None, TAXONOMY)
    tab.open(html_path.as_uri())
    tab.quiet()
    assert tab.row_count() == 41, "the conversation browser lost its rows"


def test_screenshot(tab: Tab, report_url: str, tmp_path: Path) -> None:
    tab.page.set_viewport_size({"width": 1280, "height": 2000})
    tab.open(report_url)
    png = tab.page.screenshot()
    tab.quiet()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1280, 2000)
    # a blank page compresses to a few KB; the report's bars, tables and text do not
    assert len(png) > 60_000, len(png)
    keep = os.environ.get("KORA_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / "report.png").write_bytes(png)


def leaderboard_page(tmp_path: Path) -> Path:
    good = records_of(make_judgments("good"))
    bad = records_of(make_judgments("bad", flip=True))
    doc = build_leaderboard(
        {
            "good": {**results_doc("good"), "scores": scores_of(good)},
            "bad": {**results_doc("bad", mock=False), "scores": scores_of(bad)},
        },
        {"good": good, "bad": bad},
        taxonomy=TAXONOMY,
    )
    page = tmp_path / "leaderboard.html"
    page.write_text(render_leaderboard(doc, TAXONOMY, {"good": good, "bad": bad}), encoding="utf-8")
    return page


def test_leaderboard_page(tab: Tab, tmp_path: Path) -> None:
    tab.open(leaderboard_page(tmp_path).as_uri())
    tab.quiet()
    tab.unique_ids()
    rows = tab.page.locator("#leaderboard tr[data-target]")
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.target)") == ["good", "bad"]
    assert tab.text('#leaderboard tr[data-target="good"] td.failing').startswith("20.0%")
    assert "MOCK" in tab.text('#leaderboard tr[data-target="good"]')
    assert "MOCK" not in tab.text('#leaderboard tr[data-target="bad"]')
    pair = tab.page.locator("#pairs-table tr").nth(1)
    cells = [" ".join(c.split()) for c in pair.locator("td").all_text_contents()]
    assert cells[:3] == ["good", "bad", "40"]
    assert cells[-2:] == [
        "bad fails significantly more often",
        "Safety: all tests; Safety: risk Cybersecurity",
    ]
    # each rank with its bootstrap interval; the two are told apart
    assert tab.text('#leaderboard tr[data-target="good"] td.rank') == "1 [1–1]"
    assert "tied" not in tab.text("#leaderboard")
    png = tab.page.screenshot()
    assert len(png) > 20_000


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_leaderboard_cell_opens_the_disagreements_side_by_side(tab: Tab, tmp_path: Path) -> None:
    tab.open(leaderboard_page(tmp_path).as_uri())
    assert tab.page.locator("#kora-compare").is_hidden()
    grid = tab.page.locator("#grid-0")
    row = grid.locator('tr[data-cell="safety/risk/cybersecurity"]')
    # coloured by adjusted verdict: bad (B) fails more after Holm; the ages after BH only
    assert "v-holm-b" in str(row.locator("td").nth(4).get_attribute("class"))
    ages = grid.locator('tr[data-cell="safety/ageRange/7to9"] td').nth(4)
    assert "v-bh-b" in str(ages.get_attribute("class"))
    violence = grid.locator('tr[data-cell="safety/risk/violence_and_physical_harm"] td').nth(4)
    assert "v-ns" in str(violence.get_attribute("class"))
    row.locator("td").nth(4).locator("a").click()
    from playwright.sync_api import expect

    expect(tab.page.locator("#kora-compare-count")).to_have_attribute("data-count", "14")
    assert tab.page.url.endswith("#cmp=0/safety/risk/cybersecurity")
    pairs = tab.page.locator("#kora-compare .sbs")
    assert pairs.count() == 10  # a page of ten, then more on demand
    first = pairs.nth(0)
    sides = first.locator(".side")
    assert sides.nth(0).locator(".side-head").text_content().split()[:2] == ["good", "exemplary"]
    assert sides.nth(1).locator(".side-head").text_content().split()[:2] == ["bad", "failing"]
    assert "how do i do the thing" in str(sides.nth(1).text_content())
    tab.page.locator("#kora-compare button.more").click()
    assert pairs.count() == 14
    assert tab.page.locator("#kora-compare button.more").is_hidden()
    # the replies with markup in them (i == 3) are text, not markup
    assert tab.page.evaluate("window.__pwned") is None
    assert "</script><script>" in str(tab.page.locator("#kora-compare").text_content())
    # a link to the view opens it; a malformed or unknown one is ignored
    for hash_, shown in (
        ("#cmp=9/x", False),
        ("#cmp=0/%E0", False),
        ("#cmp=0/safety/overall", True),
    ):
        tab.open(leaderboard_page(tmp_path).as_uri() + hash_)
        assert tab.page.locator("#kora-compare").is_visible() == shown
    tab.page.locator("#kora-compare button.close").click()
    assert tab.page.locator("#kora-compare").is_hidden() and "#" not in tab.page.url
    tab.quiet()
    tab.unique_ids()


def _no_nul(s: str) -> str:
    # The HTML parser drops NUL from the page's text (the spec's rule); in the browser's
    # rows, which come from the JSON data, it stays.
    return s.replace("\x00", "")


@pytest.mark.slow
def test_hostile_content_in_every_field_shows_as_text(tab: Tab, tmp_path: Path) -> None:
    records = hostile_records()
    html_path = tmp_path / "hostile.html"
    write_report(records, hostile_results(), html_path, tmp_path / "s.json", TAXONOMY)
    tab.open(html_path.as_uri())
    tab.quiet()
    page = tab.page
    # nothing ran, nothing was added: the page's own three scripts (two of JSON), no image
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.scripts.length") == 3
    assert page.locator("img, iframe, object, embed, b").count() == 0
    # the page's own text, rendered on the server
    results = hostile_results()
    assert page.locator("h1").text_content() == _no_nul("KORA report: " + results["target"])
    assert page.locator("#mock-note").text_content() == _no_nul("Mock run. " + results["note"])
    firsts = page.locator("#safety-by-risk tr td:first-child").all_text_contents()
    for h in HOSTILE:
        assert firsts.count(_no_nul(h)) == 2  # the category row and the risk row
    # every row of the browser shows its title, risk, age range and prompt as given
    assert tab.row_count() == len(records)
    rows = page.locator("#kora-tests tr.row").evaluate_all(
        "rs => rs.map(r => Array.from(r.cells).slice(0, 4).map(c => c.textContent))"
    )
    by_title = {r[0]: r for r in rows}
    for h in HOSTILE:
        assert by_title[h] == [h, h, h, h]
    # and, opened, its scenario, transcript, each judge and their reasons (or the error)
    for i in range(len(records)):
        page.locator("#kora-tests tr.row").nth(i).click()
        detail = page.locator("#kora-tests tr.detail")
        title = str(detail.locator("dd").first.text_content())
        assert title in HOSTILE
        assert detail.locator(".msg").all_text_contents() == ["CHILD" + title, "AI" + title]
        if detail.locator(".banner.warn").count():
            assert detail.locator(".banner.warn").text_content() == "Test failed: " + HOSTILE[3]
        else:
            assert detail.locator(".verdict h4").all_text_contents() == [title]
            assert set(detail.locator(".verdict .reasons").all_text_contents()) == {title}
        page.locator("#kora-tests tr.row.open").click()  # close it again
    # the search box takes hostile text as text too
    page.fill("#f-q", HOSTILE[3])
    assert tab.matches() == 1
    assert page.evaluate("window.__pwned") is None
    tab.quiet()


# --- interactions -----------------------------------------------------------------------


def _in_view(tab: Tab, selector: str) -> bool:
    """The element's top is within the viewport (it was scrolled to)."""
    top = tab.page.locator(selector).evaluate("e => e.getBoundingClientRect().top")
    return bool(-2 <= top < tab.page.viewport_size["height"])  # scrolling rounds to pixels


def test_heatmap_cell_opens_its_conversations(tab: Tab, report_url: str) -> None:
    tab.open(report_url)
    row = tab.page.locator("#heatmap-table tr.risk", has_text="Violence & Physical Harm")
    row.locator("td.cell").first.locator("a").click()  # violence, 7to9: 3 of 10 failing
    tab.shows(3)
    rows = tab.page.locator("#kora-tests tr.row").evaluate_all(
        "rs => rs.map(r => [r.cells[1].textContent, r.cells[2].textContent,"
        " r.cells[4].textContent])"
    )
    assert rows == [["Violence & Physical Harm", "7to9", "failing"]] * 3
    # the controls say what is shown, and the browser is on screen
    assert tab.page.input_value("#f-risk") == "violence_and_physical_harm"
    assert tab.page.input_value("#f-age") == "7to9"
    assert tab.page.input_value("#f-grade") == "failing"
    assert _in_view(tab, "#conversations")
    # the row's "all ages" cell and the "All risks" row open theirs
    row.locator("td.cell").last.locator("a").click()
    tab.shows(6)
    assert tab.page.input_value("#f-age") == ""
    tab.page.locator("#heatmap-table tr.cat td.cell").last.locator("a").click()
    tab.shows(8)
    assert tab.page.input_value("#f-risk") == ""
    # back: the previous view
    tab.page.go_back()
    tab.shows(6)
    tab.quiet()


def test_section_links_keep_the_filters(tab: Tab, report_url: str) -> None:
    tab.open(report_url)
    tab.page.select_option("#f-grade", "failing")
    tab.page.select_option("#f-risk", "cybersecurity")
    tab.page.fill("#f-q", "Scenario")
    view = tab.page.evaluate("location.href")  # page.url can lag behind replaceState
    assert tab.matches() == 2
    for link, section in (("Risk × age", "#heatmap"), ("Conversations", "#conversations")):
        tab.page.locator("p.meta a", has_text=link).click()
        tab.settle()  # a hashchange, had the link changed the address, would have run
        assert _in_view(tab, section), section
        assert tab.matches() == 2 and tab.row_count() == 2
        assert tab.page.input_value("#f-grade") == "failing"
        assert tab.page.input_value("#f-risk") == "cybersecurity"
        assert tab.page.input_value("#f-q") == "Scenario"
        assert tab.page.evaluate("location.href") == view  # it still links to this view
    # a section typed into the address keeps them too
    tab.page.evaluate("location.hash = '#judges'")
    tab.page.wait_for_function("location.hash === '#judges'")
    tab.settle()
    assert _in_view(tab, "#judges") and tab.matches() == 2
    tab.quiet()


FAILING_RATES = (
    "#headline-failing .value",
    "#criteria-table td.failing",
    "#safety-by-risk td.failing",
    "#heatmap-table td.cell",
    ".behaviour td.failing",
    "#prompt-rates td.failing",
    "#prompt-paired td.failing",
)


def _on_screen(tab: Tab, selector: str) -> None:
    cells = tab.page.locator(selector)
    assert cells.count() > 0, selector
    width = tab.page.viewport_size["width"]
    for i in range(cells.count()):
        cell = cells.nth(i)
        box = cell.bounding_box()
        assert cell.is_visible() and box is not None, f"{selector} #{i} hidden"
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, f"{selector} #{i}: {box}"
        assert "%" in str(cell.text_content())


@pytest.mark.slow
def test_narrow_screen_keeps_the_failing_rates_visible(
    tab: Tab, report_url: str, tmp_path: Path
) -> None:
    tab.page.set_viewport_size({"width": 360, "height": 740})
    tab.open(report_url)
    # nothing runs off the side of the page: no sideways scrolling to find a figure
    assert tab.page.evaluate("document.documentElement.scrollWidth") <= 360
    for selector in FAILING_RATES:
        _on_screen(tab, selector)
    tab.open(leaderboard_page(tmp_path).as_uri())
    assert tab.page.evaluate("document.documentElement.scrollWidth") <= 360
    _on_screen(tab, "#leaderboard td.failing")
    tab.quiet()


# --- empty and cut-short replies --------------------------------------------------------


def test_flagged_replies_are_counted_and_marked(tab: Tab, report_url: str) -> None:
    tab.open(report_url)
    counts = tab.page.locator("#reply-counts tr[data-reply]").evaluate_all(
        "rs => rs.map(r => [r.dataset.reply, r.cells[1].textContent, r.cells[2].textContent])"
    )
    assert counts == [
        ["empty", "1", "1.2%"],
        ["max_tokens", "1", "1.2%"],
        ["content_filter", "1", "1.2%"],
        ["refusal", "1", "1.2%"],
        ["other", "0", "0.0%"],
        ["stop", "75", "93.8%"],
        ["unknown", "2", "2.5%"],
    ]
    assert tab.text("#reply-tests").startswith("3 of 40 tests had at least one empty or cut-short")
    # the link shows those three tests, each row marked with what went wrong
    tab.page.locator("#reply-tests a").click()
    tab.shows(3)
    assert tab.page.is_checked("#f-replies")
    marks = tab.page.locator("#kora-tests tr.row").evaluate_all(
        "rs => rs.map(r => Array.from(r.cells[0].querySelectorAll('.flag.reply'))"
        ".map(f => f.textContent).join(' '))"
    )
    assert sorted(marks) == ["cut", "empty filtered", "refused"]
    # opened, the reply itself carries the badge; the other reply does not
    tab.page.locator("#kora-tests tr.row", has_text="cut").click()
    who = tab.page.locator("#kora-tests tr.detail .msg.assistant .who").all_text_contents()
    assert who == ["AI", "AIcut at the length limit"]
    # and the filter clears like any other
    tab.page.uncheck("#f-replies")
    assert tab.matches() == 41
    tab.quiet()


def test_without_turns_nothing_is_shown_of_them(tab: Tab, tmp_path: Path) -> None:
    html_path = tmp_path / "report.html"
    write_report(make_judgments(turns=False), results_doc(), html_path, None, TAXONOMY)
    tab.open(html_path.as_uri())
    assert tab.row_count() == 41
    for selector in ("#replies", "#f-replies", ".flag.reply", 'a[href="#replies"]'):
        assert tab.page.locator(selector).count() == 0, selector
    tab.quiet()
