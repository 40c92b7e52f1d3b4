"""report.html in a real browser: headless Chromium loads the fixture run's report.

Checks that the page loads without console messages (errors, uncaught exceptions, blocked
requests all land there), that the rendered DOM shows the expected figures, that the
conversation browser's filters (set through the page address) select the expected tests,
and that a screenshot is a real, non-trivial image.

Chromium is looked up as $KORA_CHROMIUM, `chromium`, `chromium-browser`, `google-chrome`.
Without it the test is skipped, except under CI (env CI set), where it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import pytest

from kora.report.leaderboard import build_leaderboard
from kora.report.pages import render_leaderboard, write_report
from kora.report.summary import records_of
from kora.stats.rates import wilson
from tests.reportdata import TAXONOMY, make_judgments, results_doc, scores_of, with_reply

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def find_chromium() -> str:
    explicit = os.environ.get("KORA_CHROMIUM")
    found = (
        shutil.which(explicit)
        if explicit
        else next((p for p in map(shutil.which, CANDIDATES) if p), None)
    )
    if found:
        return found
    message = (
        f"headless Chromium not found ({'KORA_CHROMIUM=' + explicit if explicit else 'not on PATH'}; "
        "install it: apt-get install -y chromium)"
    )
    if _ci():
        pytest.fail(f"{message}; CI is set, so the browser test may not be skipped")
    pytest.skip(message)


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


class Browser:
    def __init__(self, binary: str, profile_root: Path) -> None:
        self.binary = binary
        self.root = profile_root

    def run(self, url: str, *extra: str) -> tuple[str, list[str]]:
        """(stdout, console lines) of one headless Chromium run on `url`."""
        self.root.mkdir(parents=True, exist_ok=True)
        profile = tempfile.mkdtemp(prefix="profile-", dir=self.root)
        cmd = [
            self.binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--no-default-browser-check",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *extra,
            url,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        console = [
            line for line in proc.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line
        ]
        assert proc.returncode == 0, f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}"
        return proc.stdout, console

    def dom(self, url: str) -> tuple[str, list[str]]:
        return self.run(url, "--dump-dom", "--virtual-time-budget=5000")


@pytest.fixture()
def browser(chromium: str, tmp_path: Path) -> Browser:
    return Browser(chromium, tmp_path / "chromium")


@pytest.fixture()
def report_url(tmp_path: Path) -> str:
    html_path = tmp_path / "report.html"
    write_report(make_judgments(), results_doc(), html_path, tmp_path / "summary.json", TAXONOMY)
    return html_path.as_uri()


def _text(dom: str) -> str:
    """Tag-free text of the dumped DOM, whitespace collapsed (for number checks)."""
    body = re.sub(r"<script\b.*?</script>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)).replace("&amp;", "&")


def test_console_errors_are_caught(browser: Browser, tmp_path: Path) -> None:
    """The capture below is not vacuous: a page that throws is seen throwing."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>throw new Error('kora-test-boom')</script></body></html>")
    _, console = browser.dom(bad.as_uri())
    assert any("Uncaught" in line and "kora-test-boom" in line for line in console), console


def test_report_loads_and_shows_the_figures(browser: Browser, report_url: str) -> None:
    dom, console = browser.dom(report_url)
    assert console == [], "console messages:\n" + "\n".join(console)
    text = _text(dom)
    # the mock note, prominently at the top
    assert 'id="mock-note"' in dom
    assert text.index("Mock run.") < text.index("Overview")
    # headline: 8 of 40 failing, with its Wilson interval
    low, high = wilson(8, 40)
    assert re.search(
        r"Safety: failing 20\.0% 95% CI " + re.escape(f"{100 * low:.1f}%–{100 * high:.1f}%"), text
    )
    assert "Safety: exemplary 60.0%" in text
    # per-risk rows and the heat map cells (violence 3/10 per age range)
    assert re.search(r"Violence & Physical Harm 30\.0% 3/10 · \[\d+%–\d+%\] 30\.0% 3/10", text)
    assert text.count("3/10") == 2
    # judges: three of them, Fleiss' kappa shown, and NO SIGNAL for anthropomorphism
    assert "3 judges on 40 tests" in text and "NO SIGNAL" in text
    # the conversation browser ran and rendered every test (41 < one page of 50)
    assert "Showing 1–41 of 41 conversations (41 in all)" in text
    assert dom.count('class="row') == 41
    assert 'data-rendered="41"' in dom


@pytest.mark.parametrize(
    ("fragment", "expected"),
    [
        ("grade=failing", 8),
        ("grade=failing&risk=cybersecurity", 2),
        ("grade=error", 1),
        ("age=7to9&prompt=child", 11),
        ("crit=epistemicHumility&grade=failing", 8),
        ("disagree=1", 8),
        ("q=" + quote("Scenario cybersecurity 13to17 #4"), 2),
        ("risk=no-such-risk&grade=nonsense", 41),
    ],
)
def test_filters(browser: Browser, report_url: str, fragment: str, expected: int) -> None:
    dom, console = browser.dom(f"{report_url}#{fragment}")
    assert console == [], "\n".join(console)
    m = re.search(r'id="kora-count"[^>]*data-matches="(\d+)"', dom) or re.search(
        r'data-matches="(\d+)"[^>]*id="kora-count"', dom
    )
    assert m is not None, "count line not rendered"
    assert int(m.group(1)) == expected
    assert dom.count('class="row') == expected


def test_open_conversation_shows_transcript_and_every_judge(
    browser: Browser, report_url: str
) -> None:
    judgments = make_judgments()
    target = next(j for j in judgments if "cybersecurity:7to9" in j.key and "-0003-" in j.key)
    dom, console = browser.dom(f"{report_url}#open={quote(target.key)}")
    assert console == [], "\n".join(console)
    assert 'class="detail"' in dom
    text = _text(dom)
    for judge in ("judge-a", "judge-b", "judge-c"):
        assert f"{judge} on safety: exemplary" in text
    assert (
        "Combined" in text and "CHILD" in text and "how do i do the thing i saw on youtube" in text
    )
    # scenario and transcript text with markup in it stay text
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in dom
    assert '<img src="x"' not in dom and 'onerror="' not in dom


def test_placeholder_in_a_reply_keeps_every_row(browser: Browser, tmp_path: Path) -> None:
    html_path = tmp_path / "hostile.html"
    judgments = with_reply(make_judgments(), "hide me: {{KORA_BODY}}")
    write_report(judgments, results_doc(), html_path, None, TAXONOMY)
    dom, console = browser.dom(html_path.as_uri())
    assert 'data-rendered="41"' in dom, "the conversation browser lost its rows"
    assert console == [], "\n".join(console)


def test_screenshot(browser: Browser, report_url: str, tmp_path: Path) -> None:
    png = tmp_path / "report.png"
    _, console = browser.run(report_url, f"--screenshot={png}", "--window-size=1280,2000")
    assert console == [], "\n".join(console)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 2000)
    # a blank page compresses to a few KB; the report's bars, tables and text do not
    assert len(data) > 60_000, len(data)
    keep = os.environ.get("KORA_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / "report.png")


def test_leaderboard_page(browser: Browser, tmp_path: Path) -> None:
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
    page.write_text(render_leaderboard(doc, TAXONOMY), encoding="utf-8")
    with ThreadPoolExecutor(2) as pool:
        dom_job = pool.submit(browser.dom, page.as_uri())
        shot = tmp_path / "leaderboard.png"
        shot_job = pool.submit(
            browser.run, page.as_uri(), f"--screenshot={shot}", "--window-size=1280,900"
        )
        dom, console = dom_job.result()
        _, console2 = shot_job.result()
    assert console == [] and console2 == [], "\n".join(console + console2)
    text = _text(dom)
    assert text.index("good") < text.index("bad fails significantly more often")
    assert "MOCK" in text and "Cybersecurity" in text
    assert shot.stat().st_size > 20_000
