"""report.html, summary.json, the leaderboard and the compare / stats commands, on the
fixture run of tests/reportdata.py (every figure known)."""

from __future__ import annotations

import base64
import gzip
import os
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kora.analysis.pagekit import json_script, pack
from kora.analysis.report.leaderboard import build_leaderboard
from kora.analysis.report.pages import render_leaderboard, render_report, write_report
from kora.analysis.report.summary import build_summary, records_of
from kora.analysis.stats.agreement import fleiss_kappa, ratings_table
from kora.analysis.stats.rates import wilson
from kora.benchmarks.outcomes import Conversation
from kora.commands.main import main as kora_main
from tests.helpers import REPO, copy_workflow, upstream
from tests.pagetext import listing, parse, texts, unpack
from tests.reportdata import (
    JUDGES,
    RISKS,
    TAXONOMY,
    XSS,
    make_judgments,
    results_doc,
    scores_of,
    with_reply,
    write_fixture_report,
    write_jsonl,
)
from tests.workflows import snakemake

# --- summary.json -----------------------------------------------------------------------


def test_summary_counts_and_intervals(tmp_path: Path) -> None:
    _, summary = write_fixture_report(tmp_path)
    on_disk = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert on_disk == orjson.loads(orjson.dumps(summary))
    assert summary["tests"] == 41 and summary["judged"] == 40 and summary["errors"] == 1
    assert summary["mock"] is True and "placeholders" in summary["note"]
    assert summary["interval"] == {"method": "wilson", "confidence": 0.95}
    safety = summary["overall"]["safety"]
    # violence: 3 of 10 per age, cybersecurity: 1 of 10 per age -> 8 of 40
    assert safety["counts"] == {"failing": 8, "adequate": 8, "exemplary": 24}
    low, high = wilson(8, 40)
    assert safety["failing"] == {
        "k": 8,
        "n": 40,
        "rate": 0.2,
        "low": round(low, 6),
        "high": round(high, 6),
    }
    assert safety["exemplary"]["k"] == 24
    # every criterion has its rates and intervals, overall and per group
    for crit in ("safety", "anthropomorphism", "epistemicHumility", "humanRedirection"):
        for rate in ("failing", "exemplary"):
            d = summary["overall"][crit][rate]
            assert d["low"] <= d["rate"] <= d["high"]
    risks = {g["riskId"]: g for g in summary["groups"]["risk"]}
    assert risks["violence_and_physical_harm"]["safety"]["failing"]["k"] == 6
    assert risks["cybersecurity"]["safety"]["failing"]["k"] == 2
    # taxonomy order: physical_and_legal_safety before online_safety
    assert [g["riskId"] for g in summary["groups"]["risk"]] == list(RISKS)
    cells = summary["groups"]["riskAgeRangePrompt"]
    assert len(cells) == 2 * 2 * 2 and sum(c["n"] for c in cells) == 40
    assert summary["overall"]["epistemicHumility"]["meanOccurrences"] == 1.0
    assert summary["overall"]["anthropomorphism"]["noSignal"] is True
    assert summary["overall"]["safety"]["noSignal"] is False


def test_summary_counts_empty_and_cut_short_replies() -> None:
    summary = build_summary(records_of(make_judgments()), results_doc(), TAXONOMY)
    # 40 tests that recorded their turns (the failed one did not), 2 replies each
    assert summary["targetReplies"] == {
        "tests": 40,
        "replies": 80,
        "empty": 1,
        "finishReasons": {
            "stop": 75,
            "max_tokens": 1,
            "content_filter": 1,
            "refusal": 1,
            "other": 0,
            "unknown": 2,
        },
        "flaggedTests": 3,
    }


def test_records_without_turns_show_nothing_of_them() -> None:
    records = records_of(make_judgments(turns=False))
    summary = build_summary(records, results_doc(), TAXONOMY)
    assert "targetReplies" not in summary
    page = render_report(records, results_doc(), TAXONOMY, summary)
    assert 'id="replies"' not in page and "Target replies" not in page
    doc = listing(page)
    assert doc["hasTurns"] is False and not any("f" in t for t in doc["tests"])


def test_summary_prompt_comparison_is_paired_by_scenario() -> None:
    summary = build_summary(records_of(make_judgments()), results_doc(), TAXONOMY)
    cmp = summary["promptComparison"]
    o = cmp["overall"]
    # 20 scenarios run under both prompts; default fails 4 + 2, child 2 + 0
    assert o["n"] == 20 and o["aFailing"]["k"] == 6 and o["bFailing"]["k"] == 2
    assert (o["aOnly"], o["bOnly"]) == (4, 0)
    assert o["p"] == pytest.approx(0.125)  # 2 * 0.5**4
    assert o["significant"] is False
    assert [r["riskId"] for r in cmp["risks"]] == list(RISKS)


def test_summary_judge_agreement() -> None:
    records = records_of(make_judgments())
    summary = build_summary(records, results_doc(), TAXONOMY)
    a = summary["judgeAgreement"]
    assert a["judges"] == list(JUDGES) and a["raters"] == 3 and a["tests"] == 40
    safety = a["criteria"]["safety"]
    # judge-c disagrees on 8 of 40 tests (i == 2): 1 of 3 pairs agree there
    assert safety["percentAgreement"] == pytest.approx(round((32 + 8 / 3) / 40, 4))
    assert safety["unanimous"] == pytest.approx(32 / 40)
    table = ratings_table(
        [[j.criteria["safety"].grade for j in r.judges] for r in records if r.judges]
    )
    assert safety["fleissKappa"] == pytest.approx(round(fleiss_kappa(table) or 0, 4))
    # everyone always agrees on anthropomorphism, all exemplary: kappa undefined
    assert a["criteria"]["anthropomorphism"]["percentAgreement"] == 1.0
    assert a["criteria"]["anthropomorphism"]["fleissKappa"] is None
    assert a["criteria"]["safety"]["perJudge"]["judge-c"]["failing"] == 16


def test_single_judge_has_no_agreement_section() -> None:
    js = [j.model_copy(update={"judges": j.judges[:1]}) for j in make_judgments()]
    summary = build_summary(records_of(js), results_doc(), TAXONOMY)
    assert summary["judgeAgreement"] is None
    page = render_report(records_of(js), results_doc(), TAXONOMY, summary)
    assert "agreement between judges cannot be measured" in parse(page).by_id("judges").text


# --- report.html ------------------------------------------------------------------------


def test_report_is_self_contained_and_safe(tmp_path: Path) -> None:
    html_path, _ = write_fixture_report(tmp_path)
    page = html_path.read_text(encoding="utf-8")
    # no network: no external scripts, styles, images or fonts
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page
    # transcripts and scenarios are data, never markup: the page's code, the list's data
    # and the texts' one block, the data xz-compressed and in base64, with not a byte of them left
    assert page.count("<script") == 3
    assert "__pwned" not in page and "onerror" not in page
    doc, text = listing(page), texts(page)
    assert len(doc["tests"]) == 41 and len(doc["titles"]) == 21 and len(text["scenarios"]) == 21
    i, one = next((i, t) for i, t in enumerate(doc["tests"]) if t.get("g"))
    assert [j["name"] for j in one["j"]] == list(JUDGES)
    # the texts go by test, in the list's order
    assert len(text["m"]) == len(text["r"]) == 41
    assert len(text["r"][i][0]) == 4 and text["r"][i][0][0].startswith("judge-a on safety")
    assert one["k"] in text["m"][i][1][1]  # the first reply names its test's key
    assert any(XSS in m[1] for ms in text["m"] for m in ms)


def test_placeholder_in_a_reply_does_not_break_the_data(tmp_path: Path) -> None:
    reply = "before {{KORA_BODY}} {{KORA_DATA}} {{KORA_TITLE}} after"
    page = render_report(records_of(with_reply(make_judgments(), reply)), results_doc(), TAXONOMY)
    assert len(listing(page)["tests"]) == 41
    assert texts(page)["m"][0][1][1] == reply


def test_embedded_json_cannot_end_its_script_element() -> None:
    text = "</script><!-- <script> & \u2028 \u2029 \x00 {{KORA_BODY}}"
    embedded = str(json_script({"t": text}))
    for raw in ("<", ">", "&", "\u2028", "\u2029", "\x00"):
        assert raw not in embedded
    assert orjson.loads(embedded) == {"t": text}


def test_packed_data_cannot_end_its_script_element() -> None:
    text = "</script><!-- <script> & \u2028 \u2029 \x00 \r\n {{KORA_BODY}} é 🙂"
    block = pack({"t": text})
    assert re.fullmatch(r"[A-Za-z0-9+/]*=*", block)  # base64: no "<", no "&", no line break
    assert unpack(block) == {"t": text}


def test_packed_prose_takes_at_most_three_quarters_of_what_gzip_would() -> None:
    """Why the page carries an xz decoder (issue 39): on LLM-written prose, the reference's
    scenarios (3.2 MB of JSON), xz's block-wide window finds what gzip's 32 KB misses."""
    docs = [orjson.loads(line) for line in upstream("scenarios.jsonl").read_bytes().splitlines()]
    block = pack(docs)
    assert unpack(block) == docs
    gzipped = base64.b64encode(gzip.compress(orjson.dumps(docs), 6, mtime=0))
    assert len(block) <= 0.75 * len(gzipped), (len(block), len(gzipped))


def test_report_is_at_most_half_the_bytes_of_the_conversations_it_shows(tmp_path: Path) -> None:
    """What lets a report travel (issue 39): the page holds every conversation, packed, in
    fewer bytes than their files; bench/report_browser.py gives the figures at full size."""
    base = [j for j in make_judgments() if j.error is None]
    tests = [j.model_copy(update={"key": f"{j.key}:{n}"}) for n in range(25) for j in base]
    html_path = tmp_path / "report.html"
    write_report(tests, results_doc(), html_path, None, TAXONOMY)
    files = sum(
        len(
            orjson.dumps(
                Conversation.model_validate(j.model_dump(include=FIELDS)).model_dump(
                    mode="json", exclude_none=True
                )
            )
        )
        + 1
        for j in tests
    )
    assert html_path.stat().st_size <= files / 2, (html_path.stat().st_size, files)
    assert len(texts(html_path.read_text(encoding="utf-8"))["m"]) == len(tests) == 1000


FIELDS = set(Conversation.model_fields)


def test_page_script_and_style_are_the_files_verbatim(tmp_path: Path) -> None:
    """They are included as templates: Jinja syntax creeping into them would be run."""
    html_path, _ = write_fixture_report(tmp_path)
    page = html_path.read_text(encoding="utf-8")
    templates = resources.files("kora.analysis.report") / "templates"
    for name in ("browser.js", "unpack.js", "report.css"):
        assert (templates / name).read_text(encoding="utf-8") in page


def test_report_figures(tmp_path: Path) -> None:
    html_path, _ = write_fixture_report(tmp_path)
    doc = parse(html_path.read_text(encoding="utf-8"))
    assert "placeholders that measure nothing" in doc.by_id("mock-note").text
    assert doc.find_all(cls="warn")[0].text == (
        "1 test failed (no grades): left out of every figure"
    )
    # the headline: 8 of 40 failing, with its Wilson interval
    low, high = wilson(8, 40)
    ci = f"[{100 * low:.1f}%–{100 * high:.1f}%]"
    assert doc.by_id("headline-failing").text == (
        f"Safety: failing 20.0% 95% CI {ci[1:-1]} · 8 of 40"
    )
    # the same figure in the criteria table and the safety-by-risk table
    assert doc.by_id("criteria-table").row("Safety")[3] == f"20.0% {ci}"
    by_risk = doc.by_id("safety-by-risk")
    assert by_risk.row("All tests")[:2] == ["All tests", "40"]
    assert by_risk.row("All tests")[3] == f"20.0% {ci}"
    assert by_risk.row("Violence & Physical Harm")[3].startswith("30.0% [")
    assert by_risk.row("Online Safety")[3].startswith("10.0% [")
    # heat map: violence fails 3 of 10 in each age range
    heat = doc.by_id("heatmap-table").row("Violence & Physical Harm")
    assert [c.split(" ")[:2] for c in heat[1:]] == [["30.0%", "3/10"]] * 2 + [["30.0%", "6/20"]]
    assert doc.by_id("criteria-table").row("Anthropomorphism NO SIGNAL")[1] == "40"
    judges = doc.by_id("judge-agreement").rows()
    assert judges[0][4] == "Fleiss' κ" and len(judges) == 5
    for section in ("distribution", "heatmap", "prompts", "behaviour", "judges", "conversations"):
        assert doc.by_id(section).tag == "section"


def test_report_without_mock_has_no_banner(tmp_path: Path) -> None:
    html_path, _ = write_fixture_report(tmp_path, mock=False)
    assert 'id="mock-note"' not in html_path.read_text(encoding="utf-8")


@pytest.mark.slow
def test_report_of_a_large_run(tmp_path: Path) -> None:
    """6,000 tests (its time: python bench/report_scale.py)."""
    base = [j for j in make_judgments() if j.error is None]
    big = []
    for n in range(150):  # 6,000 tests
        for j in base:
            big.append(j.model_copy(update={"key": f"{j.key}:{n}"}))
    records = records_of(big)
    write_report(records, results_doc(), tmp_path / "r.html", tmp_path / "s.json", TAXONOMY)
    assert orjson.loads((tmp_path / "s.json").read_bytes())["judged"] == 6000


# --- leaderboard ------------------------------------------------------------------------


@pytest.mark.slow
def test_leaderboard_ranks_and_compares_targets() -> None:
    good = records_of(make_judgments("good"))
    bad = records_of(make_judgments("bad", flip=True))

    def results_of(records: list[Any], name: str) -> dict[str, Any]:
        return {**results_doc(name, mock=False), "scores": scores_of(records)}

    doc = build_leaderboard(
        {"bad": results_of(bad, "bad"), "good": results_of(good, "good")},
        {"good": good, "bad": bad},
        taxonomy=TAXONOMY,
    )
    assert [t["target"] for t in doc["targets"]] == ["good", "bad"]
    assert doc["targets"][0]["safety"]["failing"]["k"] == 8
    (pair,) = doc["pairs"]
    assert (pair["a"], pair["b"], pair["schema"]) == ("good", "bad", "kora-comparison/1")
    o = pair["cells"][0]["failing"]
    # bad fails every cybersecurity scenario i < 4 under both prompts: 16 more tests
    assert pair["cells"][0]["id"] == "safety/overall" and pair["paired"] == 40
    assert o["aOnly"] == 0 and o["bOnly"] == 14 and o["worse"] == "b"
    assert o["holm"] and o["p"] == pytest.approx(2 * 0.5**14)
    risks = {c["value"]: c["failing"] for c in pair["cells"] if c["dimension"] == "risk"}
    assert risks["cybersecurity"]["holm"] and not risks["violence_and_physical_harm"]["bh"]
    # taxonomy order: violence (physical and legal safety) before cybersecurity
    assert list(risks) == ["violence_and_physical_harm", "cybersecurity"]
    # the ranks: good first, told apart from bad
    assert doc["ranking"]["targets"]["good"] == {
        "rank": 1,
        "low": 1,
        "high": 1,
        "failing": 8,
        "tiedWith": [],
    }
    board = parse(render_leaderboard(doc, TAXONOMY, {"good": good, "bad": bad}))
    ranking = [tr for tr in board.by_id("leaderboard").find_all("tr") if "data-target" in tr.attrs]
    assert [tr.attrs["data-target"] for tr in ranking] == ["good", "bad"]
    assert ranking[0].find_all("a")[0].attrs["href"] == "good/report.html"
    assert ranking[0].find_all("td", cls="failing")[0].text.startswith("20.0% [")
    pair_row = board.by_id("pairs-table").row("good")
    assert pair_row[:3] == ["good", "bad", "40"]
    assert pair_row[-2:] == [
        "bad fails significantly more often",
        "Safety: all tests; Safety: risk Cybersecurity",
    ]


# --- commands ---------------------------------------------------------------------------


def test_cmd_stats_flags_no_signal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "j" / "a.jsonl", make_judgments())
    assert kora_main(["stats", str(tmp_path / "j")]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "NO SIGNAL" in lines["anthropomorphism"]
    assert "NO SIGNAL" not in lines["safety"]
    share = r"20\.0% \[[\d.]+–[\d.]+\]"  # each share with its interval
    assert re.search(rf"safety\s+40\s+8 {share}\s+8 {share}\s+24 60\.0% \[", out)
    assert "40 judged tests (1 failed)" in out
    assert re.search(r"epistemicHumility .* 1\.00\b", out)
    assert path.exists()


def test_cmd_stats_shows_only_the_criteria_asked_and_names_one_it_does_not_know(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(tmp_path / "j" / "a.jsonl", make_judgments())
    assert kora_main(["stats", str(tmp_path / "j"), "--criteria", "anthropomorphism"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:] if line.strip()]
    assert rows == ["anthropomorphism"]
    # a typo is named, not shown as a row of zeros as if no test had the criterion
    assert kora_main(["stats", str(tmp_path / "j"), "--criteria", "safty"]) == 2
    err = capsys.readouterr().err
    assert "--criteria: no criterion 'safty' in these tests (did you mean 'safety'?)" in err


def test_cmd_compare_prints_flip_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", make_judgments())
    b = write_jsonl(tmp_path / "b" / "x.jsonl", make_judgments(flip=True))
    assert kora_main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "matched 40 tests by key; only in A 0, only in B 0" in out
    block = out.split("Safety (safety)")[1].split("\n\n")[0]
    # 14 cybersecurity tests flip to failing: 4 from adequate (i = 2), 10 from exemplary
    rows = [line.split() for line in block.splitlines()[2:5]]
    assert rows[0][1:] == ["8", "0", "0"]
    assert rows[1][1:] == ["4", "4", "0"]
    assert rows[2][1:] == ["10", "0", "14"]
    assert "agreement 65.0%" in block and "14 flipped" in block


def test_cmd_compare_reads_reference_per_test_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reference per-test JSON (no key, no judges) joins the project's JSONL by test key."""
    judgments = make_judgments()
    ref = tmp_path / "ref" / "testResults"
    ref.mkdir(parents=True)
    for n, j in enumerate(judgments):
        if j.error:
            continue
        d = j.model_dump(mode="json", exclude_none=True)
        doc = {
            k: d[k] for k in ("scenario", "prompt", "messages", "assessment", "behaviorAssessment")
        }
        for k in ("id", "riskCategoryId", "riskId", "ageRange"):
            doc["scenario"].pop(k)  # reference layout: ids only inside `seed`
        (ref / f"{n:04d}.json").write_bytes(orjson.dumps(doc))
    own = write_jsonl(tmp_path / "own.jsonl", judgments)
    assert kora_main(["compare", str(tmp_path / "ref"), str(own)]) == 0
    out = capsys.readouterr().out
    assert "matched 40 tests" in out and "agreement 100.0%" in out


def test_cmd_compare_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_jsonl(tmp_path / "results" / "good" / "judgments" / "s.jsonl", make_judgments("good"))
    write_jsonl(
        tmp_path / "results" / "bad" / "judgments" / "s.jsonl", make_judgments("bad", flip=True)
    )
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert kora_main(["compare-targets", "good", "bad"]) == 0
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "cells that differ after Holm: safety overall, safety risk cybersecurity" in out
    assert orjson.loads((tmp_path / "results/good/compare-bad.json").read_bytes())["a"] == "good"


def test_cmd_errors_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"scenario": {"seed": {}}, "prompt": "child"}\n')
    assert kora_main(["stats", str(bad)]) == 2
    assert f"{bad}:1: missing field riskCategoryId" in capsys.readouterr().err
    assert kora_main(["stats", str(tmp_path / "nope")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


# --- the Snakemake rules ----------------------------------------------------------------

CONFIG = {
    "models": {"mock": {"provider": "mock"}},
    "seed_model": "mock",
    "expand_model": "mock",
    "user_model": "mock",
    "judges": ["mock"],
    "targets": {
        "alpha": {"model": "mock", "prompts": ["default", "child"]},
        "beta": {"model": "mock", "prompts": ["child"]},
    },
    "grid": {
        "risks": ["violence_and_physical_harm"],
        "age_ranges": ["7to9"],
        "motivations": ["curiosity_exploration"],
        "seeds_per_task": 2,
    },
}


@pytest.mark.slow
def test_report_and_leaderboard_rules(tmp_path: Path) -> None:
    copy_workflow(tmp_path)
    # this run's own config.yaml: only mock targets, so the leaderboard needs no key
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    run = snakemake(
        tmp_path, "results/alpha/report.html", "results/leaderboard.html", configfile=None
    )
    assert run.returncode == 0, run.stderr[-4000:]
    summary = orjson.loads((tmp_path / "results/alpha/summary.json").read_bytes())
    results = orjson.loads((tmp_path / "results/alpha/results.json").read_bytes())
    assert summary["judged"] == results["tests"] > 0
    assert summary["mock"] is True
    page = (tmp_path / "results/alpha/report.html").read_text(encoding="utf-8")
    assert 'id="mock-note"' in page and "Violence &amp; Physical Harm" in page
    board = (tmp_path / "results/leaderboard.html").read_text(encoding="utf-8")
    assert 'data-target="alpha"' in board and 'data-target="beta"' in board
    doc = orjson.loads((tmp_path / "results/leaderboard.json").read_bytes())
    (pair,) = doc["pairs"]
    # beta ran the child prompt only: the pairs are alpha's child tests
    assert pair["paired"] == pair["cells"][0]["n"] == results["tests"] // 2
    assert (tmp_path / "logs/report/alpha.log").exists()


def test_report_edge_cases(tmp_path: Path) -> None:
    """Nothing judged, or one prompt variant only: the page still renders, saying so."""
    failed = [j for j in make_judgments() if j.error]
    summary = write_report(
        failed, results_doc(), tmp_path / "a.html", tmp_path / "a.json", TAXONOMY
    )
    assert summary["judged"] == 0 and summary["overall"]["safety"]["failing"]["rate"] is None
    assert summary["promptComparison"] is None and summary["judgeAgreement"] is None
    page = parse((tmp_path / "a.html").read_text(encoding="utf-8"))
    assert page.find_all(cls="warn")[0].text.startswith("1 test failed (no grades)")
    assert page.by_id("headline-failing").text == "Safety: failing – no tests"
    empty = write_report([], {}, tmp_path / "b.html", tmp_path / "b.json")
    assert empty["tests"] == 0
    child_only = [j for j in make_judgments() if j.prompt == "child" and j.error is None]
    res = {**results_doc(mock=False), "prompts": ["child"], "skippedPrompts": ["default"],
           "skippedReason": "the target is a deployed chat endpoint"}  # fmt: skip
    write_report(child_only, res, tmp_path / "c.html", None, TAXONOMY)
    page = parse((tmp_path / "c.html").read_text(encoding="utf-8"))
    assert (
        "Only one prompt variant was run (child): no paired comparison."
        in page.by_id("prompts").text
    )
    assert page.find_all(cls="warn")[0].text == (
        "prompt variant(s) default not run: the target is a deployed chat endpoint"
    )
    assert not [n for n in page.find_all() if n.attrs.get("id") == "mock-note"]


def test_an_incomplete_run_is_marked_so_at_the_top(tmp_path: Path) -> None:
    """A run with failed tests keeps its report, clearly marked as incomplete."""
    from tests.reportdata import TAXONOMY, make_judgments

    doc_in = dict(results_doc(mock=False), complete=False, failedTests=1)
    html_path = tmp_path / "report.html"
    summary = write_report(make_judgments(), doc_in, html_path, tmp_path / "s.json", TAXONOMY)
    doc = parse(html_path.read_text(encoding="utf-8"))
    banner = doc.by_id("incomplete")
    assert banner.attrs.get("role") == "alert"
    assert "Incomplete run" in banner.text and "1 test failed" in banner.text
    assert "run the same command again" in banner.text
    assert summary["complete"] is False
    complete = dict(results_doc(mock=False), complete=True, failedTests=0)
    write_report([j for j in make_judgments() if j.error is None], complete, html_path)
    assert 'id="incomplete"' not in html_path.read_text(encoding="utf-8")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("stage", ["judgments", "scenarios"])
def test_the_banner_names_earlier_stages_only_when_they_failed(tmp_path: Path, stage: str) -> None:
    from tests.reportdata import TAXONOMY, make_judgments

    failed = {"stage": stage, "shard": "r/7to9/m", "failed": 1, "errors": []}
    doc_in = dict(results_doc(mock=False), complete=False, failedTests=1, stageFailures=[failed])
    html_path = tmp_path / "report.html"
    write_report(make_judgments(), doc_in, html_path, None, TAXONOMY)
    page = parse(html_path.read_text(encoding="utf-8"))
    banner = page.by_id("incomplete").text
    assert ("items of earlier stages failed" in banner) is (stage == "scenarios")
    problems = " ".join(n.text for n in page.find_all(cls="warn"))
    assert f"1 shard ({stage}) recorded failed items" in problems, problems


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n", [1, 12])
def test_the_banner_names_the_rejected_scenarios_and_why(tmp_path: Path, n: int) -> None:
    """Each seed whose scenario never passed validation, by id, cell and the validator's
    reason, as the results rule reads them from the .rejected.jsonl shards; five at most."""
    from kora.analysis.results import ResultsMeta, build_results
    from tests.reportdata import TAXONOMY, make_judgments

    rejected = [
        {"seed": {"id": f"seed-{i}", "riskId": "cybersecurity", "ageRange": "10to12"},
         "lastReasons": f"reason {i}: the first message does not fit the risk"}
        for i in range(n)
    ]  # fmt: skip
    meta = ResultsMeta(benchmark="v1", target="t", judges=list(JUDGES), user="child-sim",
                       prompts=["default"], skipped=[], models={}, imported=False)  # fmt: skip
    judgments = write_jsonl(tmp_path / "j.jsonl", make_judgments())
    doc, _ = build_results(meta, TAXONOMY, [judgments], [], rejected)
    assert doc["rejectedScenarios"] == n
    html_path = tmp_path / "report.html"
    write_report(make_judgments(), doc, html_path, None, TAXONOMY)
    page = parse(html_path.read_text(encoding="utf-8"))
    problems = " ".join(n.text for n in page.find_all(cls="warn"))
    if n == 1:
        assert "1 scenario was rejected by validation, so its seed has no test: " in problems
    else:
        assert (
            f"{n} scenarios were rejected by validation, so their seeds have no test: " in problems
        )
        assert "seed-5" not in problems and f"and {n - 5} more" in problems
    assert "seed-0 (cybersecurity, 10to12): reason 0: the first message does not fit" in problems
    assert ".rejected.jsonl" in problems


@pytest.mark.slow
def test_the_same_run_gives_the_same_page(tmp_path: Path) -> None:
    """report.html is the same bytes whatever Python's hash seed (no set order leaks)."""
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, '.');"
        "from tests.reportdata import TAXONOMY, make_judgments, results_doc;"
        "from kora.analysis.report.pages import write_report;"
        "write_report(make_judgments(), results_doc(), Path(sys.argv[1]), None, TAXONOMY)"
    )
    pages = []
    for seed in ("1", "4", "5"):  # 4 orders the two risks of the fixture the other way
        out = tmp_path / f"r{seed}.html"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, "-c", code, str(out)], check=True, env=env, cwd=REPO)
        pages.append(out.read_bytes())
    assert pages[0] == pages[1] == pages[2]
