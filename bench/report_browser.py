"""report.html at one target's full size, measured in headless Chromium.

    python bench/report_browser.py                    # the three pages, 12,000 conversations each
    python bench/report_browser.py --shape v2 --runs 3
    python bench/report_browser.py --tests 4000 --keep /tmp/pages   # keep the pages
    python bench/report_browser.py --compressibility  # deflate and xz on the pages' text

Three pages are built from generated judged tests (seeded, the same bytes every time):
v1, the full grid at the default 8 seeds (25 risks x 3 age ranges x 10 motivations x 8
seeds x 2 prompts = 12,000 conversations of 3 turns), each reply a few hundred words; a
v2-shaped one (12,000 conversations of 8 turns, seven mechanisms, the `default` prompt),
the same lengths; and v1-real, v1's grid with every text cut to 0.32 of its length, the
size of a real v1 run's conversations (issue 39: 2.35 KB of report.html a conversation
before the page was packed). Beside each page's bytes, the bytes of the conversation files
it shows, as the conversations stage would write them. Each page is opened `--runs` times
in a fresh Chromium context and measured with the page's own clock (performance.now(),
from navigation start):

- first view: the frame that painted the heat map's cells (Chromium's Element Timing),
  the conversation browser's first page rendered and drawn, and when the transcripts can
  be searched (the page's own mark, where the page loads them after its first view);
- a grade filter (the Grade control set to failing, then back to any grade), the same
  with a search in force, and a search over the transcripts (a word in about 1 % of
  them, then cleared): from the control's event to the browser's count updated, and to
  the next frame drawn after it. The first search of a page is printed apart (it may
  build an index); the figures are medians.

Printed with the page's bytes and the ratios to the budgets (first view 2 s, a filter or
a search 200 ms; issue 39's for the bytes: at most half the conversation files', and 15
MB for v1-real). No figure here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kora import benchmarks  # noqa: E402
from kora.analysis.report.pages import write_report  # noqa: E402
from kora.analysis.report.summary import records_of  # noqa: E402
from kora.benchmarks.schemas import AGE_RANGES  # noqa: E402
from tests.chromium import CHROMIUM_ARGS, chromium_path  # noqa: E402

FIRST_VIEW_BUDGET = 2000.0  # ms
FILTER_BUDGET = 200.0  # ms
RARE = "trampoline"  # in about 1 % of the replies: what the search looks for

COMMON = """
the a and to of it you is that in for this can be are with on if your not or what
about when they have as do how at but so there some one more help people feel might
like good safe talk make sure know think just way also things other time someone
really important maybe could would should want try something adult trusted parent
teacher friend online game video app school home message photo share private account
password stranger careful risk danger hurt body question answer idea kind worried
sad angry scared okay happy understand because often never always sometimes first
next then after before ask tell help search find learn use keep stay call report
block phone website chat group rules reason choice decide change grow different
same right wrong better best small big new old real fake true story friendly calm
"""
WORDS = COMMON.split()


SOUNDS = "ka lo mi ter an be ro sa tion in el ou re di ven ly st ar po ch gra fi nu de ce"
SYLLABLES = SOUNDS.split()


class Words:
    """Random text: slices of one long seeded stream of words drawn with Zipf's law from
    the common words above and 4,000 made-up ones. It compresses as English prose does
    (deflate at level 6: 2.9 times, as the GPL's text), not better."""

    def __init__(self, rng: random.Random, scale: float = 1.0) -> None:
        self.rng = rng
        self.scale = scale
        made_up = {"".join(rng.choices(SYLLABLES, k=rng.choice((2, 3, 3, 4)))) for _ in range(4200)}
        vocabulary = [*WORDS, *sorted(made_up - set(WORDS))]
        weights = [1 / rank for rank in range(1, len(vocabulary) + 1)]
        stream = rng.choices(vocabulary, weights, k=400_000)
        for i in range(0, len(stream), 13):  # sentences of about a dozen words
            stream[i] = stream[i].capitalize()
            if i:
                stream[i - 1] += "."
        self.stream = stream

    def __call__(self, low: int, high: int, rare: float = 0.0, scaled: bool = True) -> str:
        n = self.rng.randint(low, high)
        if scaled:  # the same draws at every scale: scale 1 is the text it always was
            n = max(1, round(n * self.scale))
        start = self.rng.randrange(len(self.stream) - n)
        words = self.stream[start : start + n]
        if rare and self.rng.random() < rare:
            words = [*words[: n // 2], RARE, *words[n // 2 :]]
        return " ".join(words)


@dataclass(frozen=True)
class Shape:
    version: str
    turns: int
    prompts: tuple[str, ...]
    scale: float = 1.0  # of every text's length in words (not of names and titles)


SHAPES = {
    "v1": Shape("v1", 3, ("default", "child")),
    "v2": Shape("v2", 8, ("default",)),
    # v1's grid with texts cut to a real v1 run's size: issue 39 measured its report.html at
    # 28 MB for 11,936 conversations, 2.35 KB a conversation; this page was 2.3 KB before it
    # was packed
    "v1-real": Shape("v1", 3, ("default", "child"), 0.32),
}


def _grid(shape: Shape, tests: int) -> Iterator[tuple[str, str, str, str, int, str]]:
    """(category, risk, age, motivation, seed, prompt) over the version's grid, seeds
    added until there are `tests` of them."""
    bm = benchmarks.get(shape.version)
    taxonomy = bm.taxonomy
    risks = [(c.id, r.id) for c in taxonomy.categories for r in c.risks]
    motivations = [m.name for m in taxonomy.motivations]
    n = 0
    seed = 0
    while True:
        for cat, risk in risks:
            for age in AGE_RANGES:
                for mot in motivations:
                    for prompt in shape.prompts:
                        if n == tests:
                            return
                        yield cat, risk, age, mot, seed, prompt
                        n += 1
        seed += 1


def _criterion(words: Words, rng: random.Random, grade: str, **extra: Any) -> dict[str, Any]:
    return {"grade": grade, "occurrenceCount": rng.randint(0, 3), "reasons": words(25, 55), **extra}


def make_tests(shape: Shape, tests: int, judges: int, seed: int = 7) -> list[dict[str, Any]]:
    """Judged tests as the judgments rule writes them (JSON objects), reply text of a few
    hundred words; 0.3 % of them failed (no grades)."""
    rng = random.Random(seed)
    words = Words(rng, shape.scale)
    bm = benchmarks.get(shape.version)
    behaviour = [c for c in bm.criteria if c != "safety"]
    preconditions = {m.id for m in bm.taxonomy.mechanisms if m.precondition}
    failing_rate: dict[str, float] = {}
    scenarios: dict[str, dict[str, Any]] = {}
    out = []
    ids: dict[tuple[str, str, str, int], str] = {}
    for cat, risk, age, mot, s, prompt in _grid(shape, tests):
        sid = ids.setdefault((risk, age, mot, s), f"{risk[:12]}-{age}-{len(ids):06d}")
        if sid not in scenarios:
            seed_doc = {
                "id": sid,
                "riskCategoryId": cat,
                "riskId": risk,
                "ageRange": age,
                "motivation": {"name": mot, "description": words(10, 20)},
                "childAge": {"7to9": 8, "10to12": 11, "13to17": 15}[age],
                "childGender": rng.choice(("girl", "boy")),
                "childRaceEthnicity": rng.choice(("white", "black", "asian", "hispanic")),
                "childCognitiveMaturity": rng.choice(("low", "medium", "high")),
                "childEmotionalMaturity": rng.choice(("low", "medium", "high")),
                "shortTitle": words(4, 8, scaled=False),
                "riskSignalType": rng.choice(("direct", "subtle", "ambiguous")),
                "socialContext": rng.choice(("alone", "peer_pressure", "online_social")),
            }
            scenarios[sid] = {
                "id": sid,
                "riskCategoryId": cat,
                "riskId": risk,
                "ageRange": age,
                "seed": seed_doc,
                "shortTitle": words(4, 9, scaled=False).capitalize(),
                "childMaturity": words(20, 45),
                "childBackground": words(20, 45),
                "narrative": words(80, 170),
                "evaluationCriteria": words(30, 70),
                "firstUserMessage": words(8, 30),
            }
        sc = scenarios[sid]
        key = f"{cat}:{risk}:{age}:{sid}:{prompt}"
        messages = []
        for turn in range(shape.turns):
            user = sc["firstUserMessage"] if turn == 0 else words(8, 40)
            messages.append({"role": "user", "content": user})
            messages.append({"role": "assistant", "content": words(100, 300, rare=0.004)})
        doc: dict[str, Any] = {
            "key": key,
            "target": "bench-target",
            "scenario": sc,
            "prompt": prompt,
            "messages": messages,
            "turns": [
                {"finishReason": "stop" if rng.random() > 0.002 else "max_tokens"}
                for _ in range(shape.turns)
            ],
        }
        if rng.random() < 0.003:
            doc["error"] = "conversation failed: TimeoutError: no answer in 120 s"
            doc["messages"] = messages[:2]
            out.append(doc)
            continue
        rate = failing_rate.setdefault(risk, rng.uniform(0.02, 0.35))
        verdicts = []
        for j in range(judges):
            r = rng.random()
            safety = "failing" if r < rate else "adequate" if r < rate + 0.3 else "exemplary"
            crits = {}
            for c in behaviour:
                grade = rng.choice(("failing", "adequate", "exemplary", "exemplary"))
                if c in preconditions and rng.random() < 0.6:
                    crits[c] = _criterion(words, rng, "adequate", notTriggered=True)
                else:
                    crits[c] = _criterion(words, rng, grade)
            verdicts.append(
                {
                    "judge": f"judge-{j + 1}",
                    "assessment": {"grade": safety, "reasons": words(30, 70)},
                    ("mechanismAssessment" if shape.version == "v2" else "behaviorAssessment"): (
                        crits
                    ),
                }
            )
        first = verdicts[0]  # the combined grades: the first judge's (a median in a run)
        doc |= {k: v for k, v in first.items() if k != "judge"}
        doc["judges"] = verdicts
        out.append(doc)
    return out


CONVERSATION_FIELDS = ("key", "target", "prompt", "scenario", "messages", "turns", "error")


def conversation_bytes(docs: list[dict[str, Any]]) -> int:
    """The bytes of the conversation files these tests' report shows: each test as the
    conversations stage writes it (kora.run.jobs.shards.write_records, a JSON object a line)."""
    return sum(
        len(orjson.dumps({k: d[k] for k in CONVERSATION_FIELDS if k in d})) + 1 for d in docs
    )


def results_doc(shape: Shape, judges: int) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "target": "bench-target",
        "judges": [f"judge-{j + 1}" for j in range(judges)],
        "user": "child-sim",
        "prompts": list(shape.prompts),
        "models": {"t": {"roles": ["target"], "provider": "openai", "model": "gpt-x"}},
    }
    if shape.version != "v1":
        doc["benchmark"] = shape.version
    return doc


def compressibility(sample: int = 8_000_000) -> None:
    """How far the pages' texts can be compressed: deflate (what browsers open) and xz at
    level 6 on `sample` bytes of replies as the pages draw them (slices of one stream), and
    on the same words drawn one by one (as often, but never the same run of words twice)."""
    rng = random.Random(1)
    words = Words(rng)
    sliced = " ".join(words(100, 300) for _ in range(sample // 1000)).encode()[:sample]
    drawn = " ".join(rng.choices(words.stream, k=sample // 4)).encode()[:sample]
    for name, text in (("the pages' replies", sliced), ("the same words drawn alone", drawn)):
        deflate = len(text) / len(zlib.compress(text, 6))
        xz = len(text) / len(lzma.compress(text, preset=6))
        print(f"{name}: deflate {deflate:.2f} x, xz {xz:.2f} x ({len(text) / 1e6:.0f} MB)")


# --- in the browser -------------------------------------------------------------------

# Runs before the page's own scripts; times are ms since navigation start. The heat map:
# the browser's own record of the frame that painted the last of its cells (Element
# Timing). The conversation browser: its first page rendered and the next frame done
# (a task after that frame's requestAnimationFrame). Searchable: the page's mark when it
# has the transcripts' text (a page without one: when its browser is drawn).
WATCH = """
(() => {
  const b = window.__koraBench = {heatmap: 0, cells: 0};
  let drawn, searchable, done = false;
  b.drawn = new Promise((resolve) => { drawn = resolve; });
  b.searchable = new Promise((resolve) => { searchable = resolve; });
  const textLoaded = (root) => {
    const text = root.getAttribute("data-text");
    if (text !== null && text !== "loaded") return false;
    const mark = performance.getEntriesByName("kora-text-loaded")[0];
    searchable(mark ? mark.startTime : b.browser);
    return true;
  };
  const check = () => {
    const root = document.getElementById("kora-browser");
    if (done || !root || b.browser === undefined || !b.cells) return;
    done = true;
    mo.disconnect();
    drawn({heatmap: b.heatmap, browser: b.browser});
    if (textLoaded(root)) return;
    const wait = new MutationObserver(() => { if (textLoaded(root)) wait.disconnect(); });
    wait.observe(root, {attributes: true, attributeFilter: ["data-text"]});
  };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const t = e.renderTime || e.loadTime;
      if (e.identifier === "kora-heat") { b.heatmap = Math.max(b.heatmap, t); b.cells++; }
    }
    check();
  }).observe({type: "element", buffered: true});
  let rendered;
  const mo = new MutationObserver(() => {
    for (const a of document.querySelectorAll("#heatmap-table td.cell a:not([elementtiming])")) {
      a.setAttribute("elementtiming", "kora-heat");
    }
    const root = document.getElementById("kora-browser");
    if (root && root.getAttribute("data-rendered") !== "0" && rendered === undefined) {
      rendered = performance.now();
      requestAnimationFrame(() => setTimeout(() => { b.browser = performance.now(); check(); }, 0));
    }
  });
  mo.observe(document, {childList: true, subtree: true, attributes: true,
                        attributeFilter: ["data-rendered"]});
})();
"""

# Sets a control and times, inside the page, its event until the browser's count changes
# (a MutationObserver on it) and until the next frame is drawn after that.
APPLY = """
async ({id, value, event}) => {
  const count = document.getElementById("kora-count");
  const control = document.getElementById(id);
  return await new Promise((resolve) => {
    let t0 = 0;
    const mo = new MutationObserver(() => {
      const t1 = performance.now();
      mo.disconnect();
      requestAnimationFrame(() => setTimeout(() => resolve({
        applied: t1 - t0, drawn: performance.now() - t0,
        matches: Number(count.getAttribute("data-matches")),
      }), 0));
    });
    mo.observe(count, {attributes: true, childList: true, characterData: true, subtree: true});
    t0 = performance.now();
    control.value = value;
    control.dispatchEvent(new Event(event, {bubbles: true}));
  });
}
"""


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs):.0f} ms"


def find_chromium() -> str:
    found, where = chromium_path()
    if not found:
        sys.exit(f"headless Chromium not found ({where}; apt-get install -y chromium)")
    return found


@dataclass
class Figures:
    heatmap: list[float]
    browser: list[float]
    searchable: list[float]
    grade: list[float]
    grade_applied: list[float]
    search_first: list[float]
    search: list[float]
    search_applied: list[float]
    grade_searched: list[float]
    failing: int = 0
    found: int = 0


def measure(browser: Any, url: str, runs: int) -> Figures:
    f = Figures([], [], [], [], [], [], [], [], [])
    errors: list[str] = []
    for _ in range(runs):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(180_000)
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.add_init_script(WATCH)
        page.goto(url, wait_until="load")
        b = page.evaluate("window.__koraBench.drawn")
        f.heatmap.append(b["heatmap"])
        f.browser.append(b["browser"])
        f.searchable.append(page.evaluate("window.__koraBench.searchable"))
        for i in range(3):
            for value in ("failing", ""):
                r = page.evaluate(APPLY, {"id": "f-grade", "value": value, "event": "change"})
                f.grade.append(r["drawn"])
                f.grade_applied.append(r["applied"])
                f.failing = r["matches"] if value else f.failing
            for value in (RARE, ""):
                r = page.evaluate(APPLY, {"id": "f-q", "value": value, "event": "input"})
                if value:
                    (f.search_first if i == 0 else f.search).append(r["drawn"])
                    f.search_applied.append(r["applied"]) if i else None
                    f.found = r["matches"]
        # the grade filter again, with a search in force
        page.evaluate(APPLY, {"id": "f-q", "value": RARE, "event": "input"})
        for _ in range(3):
            for value in ("failing", ""):
                r = page.evaluate(APPLY, {"id": "f-grade", "value": value, "event": "change"})
                f.grade_searched.append(r["drawn"])
        if errors:
            sys.exit("the page threw: " + "; ".join(errors))
        context.close()
    return f


def _line(what: str, xs: list[float], budget: float, note: str = "") -> None:
    x = statistics.median(xs)
    runs = ", ".join(f"{v:.0f}" for v in xs) if len(xs) <= 8 else f"{min(xs):.0f}-{max(xs):.0f}"
    print(f"  {what:<16}{x:6.0f} ms  {x / budget:5.2f} of {budget:g} ms  ({runs}){note}")


def report(
    name: str, path: Path, tests: int, conversations: int, built: float, f: Figures
) -> dict[str, Any]:
    size = path.stat().st_size
    print(
        f"{name}: {tests:,} conversations, report.html {size / 1e6:.1f} MB (built in {built:.1f} s)"
        f", {size / conversations:.2f} of the conversation files' {conversations / 1e6:.1f} MB"
    )
    _line("heat map drawn", f.heatmap, FIRST_VIEW_BUDGET)
    _line("browser drawn", f.browser, FIRST_VIEW_BUDGET)
    _line("searchable", f.searchable, FIRST_VIEW_BUDGET)
    _line("grade filter", f.grade, FILTER_BUDGET, f"; count set after {ms(f.grade_applied)}")
    _line("grade, searched", f.grade_searched, FILTER_BUDGET)
    _line("first search", f.search_first, FILTER_BUDGET)
    _line("search", f.search, FILTER_BUDGET, f"; count set after {ms(f.search_applied)}")
    print(f"  ({f.failing:,} failing, {f.found:,} with {RARE!r})")
    return {
        "shape": name,
        "tests": tests,
        "bytes": size,
        "conversationBytes": conversations,
        "heatmapMs": f.heatmap,
        "browserMs": f.browser,
        "searchableMs": f.searchable,
        "gradeMs": f.grade,
        "gradeSearchedMs": f.grade_searched,
        "firstSearchMs": f.search_first,
        "searchMs": f.search,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=[*SHAPES, "all"], default="all")
    ap.add_argument("--tests", type=int, default=12_000)
    ap.add_argument("--judges", type=int, default=1, help="judges a test (the config's default: 1)")
    ap.add_argument("--runs", type=int, default=5, help="page loads a shape")
    ap.add_argument("--keep", type=Path, help="write the pages here and keep them")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument(
        "--compressibility", action="store_true", help="only print how far the texts compress"
    )
    args = ap.parse_args()
    if args.compressibility:
        compressibility()
        return
    from playwright.sync_api import sync_playwright

    shapes = list(SHAPES) if args.shape == "all" else [args.shape]
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kora-bench-browser-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        pages = []
        for name in shapes:
            shape = SHAPES[name]
            docs = make_tests(shape, args.tests, args.judges)
            started = time.perf_counter()
            records = records_of(docs)
            path = folder / f"report-{name}.html"
            taxonomy = benchmarks.get(shape.version).taxonomy
            write_report(records, results_doc(shape, args.judges), path, None, taxonomy)
            built = time.perf_counter() - started
            pages.append((name, path, len(docs), conversation_bytes(docs), built))
            del docs, records
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=find_chromium(), headless=True, args=CHROMIUM_ARGS
            )
            for name, path, tests, conversations, built in pages:
                figures = measure(browser, path.as_uri(), args.runs)
                out.append(report(name, path, tests, conversations, built, figures))
            browser.close()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
