"""People's grades in summary.json and the report: the corrected rates beside the judge's,
worked out here from the grades (not through the function that computes them), review
grades counted apart and left out of the rates, v2 mechanisms, and nothing at all for a
run nobody graded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from statsmodels.stats.proportion import proportion_confint

from kora.analysis.annotate import labels, sample
from kora.analysis.records import TestRecord, judged, load_records
from kora.analysis.report.corrected import People, load_people
from kora.analysis.report.pages import write_report
from kora.run.workflow.gather_inputs import annotation_files
from tests.helpers import MECHANISMS
from tests.reportdata import TAXONOMY, make_judgments, results_doc, write_jsonl
from tests.test_report_browser import _on_screen, chromium, find_chromium, tab  # noqa: F401

pytestmark = pytest.mark.timeout(60)
WORSE = {"exemplary": "adequate", "adequate": "failing", "failing": "failing"}


@pytest.fixture()
def records(tmp_path: Path) -> list[TestRecord]:
    return load_records([write_jsonl(tmp_path / "j.jsonl", make_judgments())])


def grade_sample(
    folder: Path, records: list[TestRecord], n: int, person: Any, who: str = "ana"
) -> dict[str, Any]:
    """`who` grades the uniform sample's first `n` conversations on every criterion,
    safety as `person(record)` says and the rest as the judge did."""
    doc, _ = sample.ensure(folder, judged(records), 1)
    by_key = {r.key: r for r in records}
    answers = []
    for key in doc["keys"][:n]:
        r = by_key[key]
        for c, v in r.criteria.items():
            grade = person(r) if c == "safety" else v.grade
            answers.append({"key": key, "criterion": c, "grade": grade, "queue": "estimate",
                            "sample": doc["id"]})  # fmt: skip
    labels.extend(labels.label_file(folder, who), answers)
    return doc


def people_of(folder: Path) -> People:
    found = load_people(sorted(folder.iterdir()))
    assert found is not None
    return found


def report(tmp_path: Path, records: list[TestRecord], people: People | None) -> dict[str, Any]:
    html, data = tmp_path / "report.html", tmp_path / "summary.json"
    write_report(records, results_doc(), html, data, TAXONOMY, people=people)
    return dict(orjson.loads(data.read_bytes()))


def test_every_conversation_graded_gives_peoples_share_exactly(
    tmp_path: Path, records: list[TestRecord]
) -> None:
    """All 40 graded, the person one grade stricter on safety than the judge wherever the
    judge said adequate: each cell's rate is people's, and the estimate their share."""
    folder = tmp_path / "annotations"
    grade_sample(folder, records, 40, lambda r: WORSE[r.criteria["safety"].grade]
                 if r.criteria["safety"].grade == "adequate" else r.criteria["safety"].grade)  # fmt: skip
    doc = report(tmp_path, records, people_of(folder))
    ok = judged(records)
    people_failing = sum(r.criteria["safety"].grade in ("failing", "adequate") for r in ok)
    c = doc["overall"]["safety"]["corrected"]["failing"]
    assert c["n"] == 40 and c["rate"] == pytest.approx(people_failing / 40)
    assert doc["overall"]["safety"]["failing"]["rate"] == pytest.approx(8 / 40)  # the judge's
    assert c["judgeExcludes"] == (
        not doc["overall"]["safety"]["failing"]["low"]
        <= c["rate"]
        <= doc["overall"]["safety"]["failing"]["high"]
    )
    low, high = proportion_confint(people_failing, 40, method="wilson")
    assert c["humansOnly"] == {"rate": 0.4, "low": round(low, 6), "high": round(high, 6)}
    hl = doc["humanLabels"]
    assert (hl["estimate"], hl["review"], hl["annotators"], hl["corrected"]) == (
        40,
        0,
        ["ana"],
        True,
    )
    assert hl["sample"]["skipped"] == 0
    # every group with 10 grades has its figures; fewer, none
    for entry in doc["groups"]["risk"] + doc["groups"]["ageRange"] + doc["groups"]["prompt"]:
        assert entry["n"] < 10 or "corrected" in entry["safety"]
    for entry in doc["groups"]["riskAgeRange"]:
        assert "corrected" not in entry["safety"]


def test_part_of_the_sample_graded_post_stratified_on_the_judges_grade(
    tmp_path: Path, records: list[TestRecord]
) -> None:
    """30 of 40 graded; the person fails every conversation the judge called adequate.
    Worked out by hand: per judge grade, people's failing share among those graded there,
    weighted by the grade's share of all 40 (a grade nobody graded merged first)."""
    folder = tmp_path / "annotations"
    doc = grade_sample(folder, records, 30, lambda r: WORSE[r.criteria["safety"].grade]
                       if r.criteria["safety"].grade == "adequate" else r.criteria["safety"].grade)  # fmt: skip
    summary = report(tmp_path, records, people_of(folder))
    ok = {r.key: r for r in judged(records)}
    graded = set(doc["keys"][:30])
    cells: dict[str, list[str]] = {}
    for k, r in ok.items():
        cells.setdefault(r.criteria["safety"].grade, []).append(k)
    counts = {g: len(set(ks) & graded) for g, ks in cells.items()}
    assert min(counts.values()) >= 5, counts  # no merging in this sample
    expected = 0.0
    for ks in cells.values():
        mine = [k for k in ks if k in graded]
        person_fails = sum(ok[k].criteria["safety"].grade in ("failing", "adequate") for k in mine)
        expected += len(ks) / 40 * person_fails / len(mine)
    c = summary["overall"]["safety"]["corrected"]["failing"]
    assert c["rate"] == pytest.approx(expected, abs=1e-6) and c["n"] == 30
    assert c["low"] < c["rate"] < c["high"]
    # the judge missed every adequate one: its interval is far below
    assert c["judgeExcludes"] and summary["overall"]["safety"]["failing"]["high"] < c["rate"]


def test_review_grades_are_counted_apart_and_change_no_rate(
    tmp_path: Path, records: list[TestRecord]
) -> None:
    folder = tmp_path / "annotations"
    doc = grade_sample(folder, records, 30, lambda r: r.criteria["safety"].grade)
    before = report(tmp_path, records, people_of(folder))
    late = doc["keys"][30:]
    # a review queue fails everything it sees; an earlier sample's grades; a line naming no queue
    labels.extend(labels.label_file(folder, "ben"), [
        {"key": k, "criterion": "safety", "grade": "failing", "queue": "judges"} for k in late
    ] + [{"key": late[0], "criterion": "safety", "grade": "failing", "queue": "estimate",
          "sample": "older"}])  # fmt: skip
    (folder / "cy.jsonl").write_bytes(
        orjson.dumps({"key": late[1], "criterion": "safety", "grade": "failing", "at": 1}) + b"\n"
    )
    after = report(tmp_path, records, people_of(folder))
    assert after["overall"] == before["overall"] and after["groups"] == before["groups"]
    hl = after["humanLabels"]
    assert (hl["estimate"], hl["review"]) == (30, 10)
    assert hl["reviewByQueue"] == {"earlier sample": 1, "judges": 10, "review": 1}
    assert hl["annotators"] == ["ana", "ben", "cy"]
    # skipping conversations of the sample is counted
    labels.append(labels.label_file(folder, "ana"), {"key": doc["keys"][35], "criterion": "safety",
                  "grade": "adequate", "queue": "estimate", "sample": doc["id"]})  # fmt: skip
    assert report(tmp_path, records, people_of(folder))["humanLabels"]["sample"]["skipped"] == 5


def test_no_label_file_no_change_and_no_sample_no_rates(
    tmp_path: Path, records: list[TestRecord]
) -> None:
    plain = report(tmp_path, records, None)
    html = (tmp_path / "report.html").read_text()
    assert "humanLabels" not in plain and 'id="corrected"' not in html
    assert "corrected" not in orjson.dumps(plain).decode()
    assert load_people([]) is None
    folder = tmp_path / "annotations"
    labels.append(labels.label_file(folder, "ana"), {"key": records[0].key, "criterion": "safety",
                                                      "grade": "failing", "queue": "risks"})  # fmt: skip
    doc = report(tmp_path, records, people_of(folder))
    assert (
        doc["humanLabels"]["corrected"] is False and "no sample drawn" in doc["humanLabels"]["why"]
    )
    assert {k: v for k, v in doc.items() if k != "humanLabels"} == plain
    assert 'id="no-corrected"' in (tmp_path / "report.html").read_text()
    (folder / "sample.json").write_bytes(b'{"design": "uniform", "keys": ')  # cut short
    assert people_of(folder).sample is None


def test_the_report_shows_the_corrected_rates_beside_the_judges(
    tmp_path: Path, records: list[TestRecord]
) -> None:
    folder = tmp_path / "annotations"
    grade_sample(folder, records, 40, lambda r: "failing")
    report(tmp_path, records, people_of(folder))
    html = (tmp_path / "report.html").read_text()
    assert (
        'id="headline-failing-corrected"' in html and "corrected by people: <strong>100.0%" in html
    )
    assert 'id="corrected-safety"' in html and 'id="label-counts"' in html
    assert html.count('class="num failing corrected"') >= 10  # overview, risks, behaviours
    assert "judge off" in html and 'href="#corrected"' in html


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_corrected_report_in_the_browser_at_desktop_and_phone_width(
    tab: Any,  # noqa: F811
    tmp_path: Path,
    records: list[TestRecord],
) -> None:
    """No console message or request; on a phone (360 px) nothing runs off the side and
    every failing rate, the judge's and the corrected one, stays on screen."""
    folder = tmp_path / "annotations"
    grade_sample(folder, records, 30, lambda r: "failing" if r.prompt == "default" else "adequate")
    report(tmp_path, records, people_of(folder))
    tab.open((tmp_path / "report.html").as_uri())
    assert tab.text("#headline-failing-corrected").startswith("corrected by people:")
    tab.unique_ids()
    tab.page.set_viewport_size({"width": 360, "height": 740})
    tab.open((tmp_path / "report.html").as_uri())
    assert tab.page.evaluate("document.documentElement.scrollWidth") <= 360
    for selector in ("#criteria-table td.failing", "#safety-by-risk td.failing",
                     "#corrected-safety td.failing", ".behaviour td.failing"):  # fmt: skip
        _on_screen(tab, selector)
    assert tab.page.locator("td.corrected.failing").count() >= 10
    tab.quiet()


def test_a_v2_mechanism_is_corrected_among_the_conversations_it_applied_to(
    tmp_path: Path,
) -> None:
    """The judge finds manipulative engagement never triggered; people find it triggered
    and failing in every second graded conversation: the rate among triggered is 1."""
    lines = []
    for i, j in enumerate(make_judgments()):
        obj = j.model_dump(mode="json", exclude_none=True)
        obj.pop("behaviorAssessment", None)
        obj.pop("judges", None)
        obj["mechanismAssessment"] = {
            m: {"grade": "adequate", "reasons": "r", "occurrenceCount": 0,
                # and sycophancy, which has no precondition, in the first test only
                "notTriggered": m == "manipulativeEngagement" or (m == "sycophancy" and i == 0)}
            for m in MECHANISMS
        }  # fmt: skip
        lines.append(orjson.dumps(obj))
    path = tmp_path / "v2.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    records = load_records([path])
    folder = tmp_path / "annotations"
    doc, _ = sample.ensure(folder, judged(records), 1)
    answers = []
    for i, key in enumerate(doc["keys"][:20]):
        me = {"grade": "failing"} if i % 2 else {"notTriggered": True}
        answers += [
            {"key": key, "criterion": "manipulativeEngagement", **me},
            {"key": key, "criterion": "sycophancy", "grade": "failing" if i < 5 else "adequate"},
        ]
    labels.extend(labels.label_file(folder, "ana"),
                  [{**a, "queue": "estimate", "sample": doc["id"]} for a in answers])  # fmt: skip
    results = {**results_doc(), "benchmark": "v2"}
    write_report(
        records, results, tmp_path / "r.html", tmp_path / "s.json", people=people_of(folder)
    )
    summary = orjson.loads((tmp_path / "s.json").read_bytes())
    me = summary["overall"]["manipulativeEngagement"]
    assert me["n"] == 0 and me["corrected"]["failing"]["rate"] == 1.0  # the judge saw none
    assert me["corrected"]["failing"]["n"] == 20 and "exemplary" in me["corrected"]
    syc = summary["overall"]["sycophancy"]["corrected"]["failing"]
    assert syc["rate"] == pytest.approx(5 / 20) and syc["judgeExcludes"]
    assert np.isclose(syc["humansOnly"]["rate"], 0.25)
    # where people found sycophancy not triggered, its rate is among the rest too
    first = make_judgments()[0].key
    labels.extend(labels.label_file(folder, "ben"), [{
        "key": first, "criterion": "sycophancy", "notTriggered": True, "queue": "estimate",
        "sample": doc["id"]}])  # fmt: skip
    write_report(
        records, results, tmp_path / "r.html", tmp_path / "s.json", people=people_of(folder)
    )
    summary = orjson.loads((tmp_path / "s.json").read_bytes())
    syc = summary["overall"]["sycophancy"]["corrected"]["failing"]
    # one post-stratum (the judge's one "not triggered" merged): sum(y) / sum(t), where
    # the first test's y and t average ana's and ben's
    ys, ts = [], []
    for i, key in enumerate(doc["keys"][:20]):
        y, t = (1.0 if i < 5 else 0.0), 1.0
        ys.append((y + 0.0) / 2 if key == first else y)
        ts.append(0.5 if key == first else t)
    if first not in doc["keys"][:20]:
        ys.append(0.0)
        ts.append(0.0)
    assert syc["n"] == len(ys) and syc["rate"] == pytest.approx(sum(ys) / sum(ts), abs=1e-6)


def test_the_report_rule_takes_the_label_files_once_there_are_any(tmp_path: Path) -> None:
    from tests.test_v2_plan import pipeline

    p = pipeline(tmp_path, total_seeds=30, distribution="us-census-2020", random_seed=7)
    assert annotation_files(p, "t") == []  # nobody graded: the rule's inputs as they were
    folder = tmp_path / p.layout.annotations("t")
    folder.mkdir(parents=True)
    (folder / "sample.json").write_text("{}")
    assert annotation_files(p, "t") == []  # a sample alone changes no figure
    (folder / "ana.jsonl").write_text("")
    (folder / "ben.jsonl").write_text("")
    rel = p.layout.annotations("t")
    assert annotation_files(p, "t") == [
        f"{rel}/ana.jsonl",
        f"{rel}/ben.jsonl",
        f"{rel}/sample.json",
    ]


@pytest.mark.slow
def test_the_leaderboard_ranks_the_graded_targets_by_their_corrected_rates(
    tmp_path: Path,
) -> None:
    """good fails less by its judge; people find good's judge too lenient (every
    conversation failing), bad's right: by corrected rates bad comes first. A target
    nobody graded is in the first ranking only."""
    from kora.analysis.report.corrected import overall_safety
    from kora.analysis.report.leaderboard import build_leaderboard
    from kora.analysis.report.pages import render_leaderboard
    from tests.reportdata import scores_of
    from tests.test_report import parse

    runs = {t: load_records([write_jsonl(tmp_path / f"{t}.jsonl", make_judgments(t, flip=t != "good"))])
            for t in ("good", "bad", "plain")}  # fmt: skip
    people = {}
    for t, person in (("good", lambda r: "failing"), ("bad", lambda r: r.criteria["safety"].grade)):
        grade_sample(tmp_path / t, runs[t], 40, person)
        people[t] = people_of(tmp_path / t)
    corrected = {t: overall_safety(runs[t], people.get(t)) for t in runs}
    assert corrected["plain"] is None and corrected["good"] is not None
    assert corrected["good"]["failing"]["rate"] == 1.0
    entries = {
        t: {**results_doc(t, mock=False), "scores": scores_of(judged(rs))} for t, rs in runs.items()
    }
    doc = build_leaderboard(entries, runs, taxonomy=TAXONOMY, corrected=corrected)
    assert doc["targets"][0]["target"] == "good"
    assert doc["correctedRanking"] == ["bad", "good"]
    assert "corrected" not in next(t for t in doc["targets"] if t["target"] == "plain")
    board = parse(render_leaderboard(doc, TAXONOMY))
    rows = [
        tr
        for tr in board.by_id("corrected-ranking-table").find_all("tr")
        if "data-target" in tr.attrs
    ]
    assert [tr.attrs["data-target"] for tr in rows] == ["bad", "good"]
    assert "100.0%" in rows[1].text and "judge off" in rows[1].text
    plain = build_leaderboard(entries, runs, taxonomy=TAXONOMY)
    assert "correctedRanking" not in plain
    assert 'id="corrected-ranking' not in render_leaderboard(plain, TAXONOMY)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_workflow_corrects_the_report_once_people_graded_and_not_before(
    tmp_path: Path,
) -> None:
    """The mock workflow end to end: the report; people's grades imported (kora annotate
    --import), and the same command re-runs the report and the leaderboard only, with
    corrected rates; the label files removed, summary.json is byte for byte the first."""
    import shutil
    import subprocess
    import sys

    import yaml

    from tests.helpers import copy_workflow
    from tests.workflows import TINY, snakemake

    copy_workflow(tmp_path)
    tiny = {
        **TINY,
        "targets": {"gpt-target": None, **TINY["targets"]},
        "grid": {**TINY["grid"], "seeds_per_task": 6},
    }
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    targets = ("results/tiny/report.html", "results/leaderboard.html")
    run = snakemake(tmp_path, *targets)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = tmp_path / "results/tiny/summary.json"
    first = summary.read_bytes()
    board = (tmp_path / "results/leaderboard.json").read_bytes()
    records = judged(load_records(sorted((tmp_path / "results/tiny/judgments").rglob("*.jsonl"))))
    assert len(records) >= 12
    graded = sample.order(records, 1)[:12]
    by_key = {r.key: r for r in records}
    grades = tmp_path / "grades.jsonl"
    grades.write_bytes(b"".join(
        orjson.dumps({"key": k, "criterion": "safety", "annotator": "ana",
                      "grade": "failing" if i % 3 == 0 else by_key[k].criteria["safety"].grade})
        + b"\n" for i, k in enumerate(graded)
    ))  # fmt: skip
    imported = subprocess.run(
        [sys.executable, "-m", "kora.commands.main", "annotate", "tiny", "--import", str(grades),
         "--configfile", "tiny.yaml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    again = snakemake(tmp_path, *targets)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "rule report:" in again.stdout + again.stderr
    assert "rule judgments" not in again.stdout + again.stderr  # no model is asked
    doc = orjson.loads(summary.read_bytes())
    assert doc["humanLabels"]["estimate"] == 12
    assert doc["overall"]["safety"]["corrected"]["failing"]["n"] == 12
    lb = orjson.loads((tmp_path / "results/leaderboard.json").read_bytes())
    assert lb["correctedRanking"] == ["tiny"]
    shutil.rmtree(tmp_path / "results/tiny/annotations")
    assert snakemake(tmp_path, *targets).returncode == 0
    assert summary.read_bytes() == first
    assert (tmp_path / "results/leaderboard.json").read_bytes() == board


def test_kora_stats_gives_the_reports_corrected_safety_rates(
    tmp_path: Path, records: list[TestRecord], capsys: pytest.CaptureFixture[str]
) -> None:
    """`kora stats results/t/judgments` finds the target's annotations beside its judged
    tests and gives the corrected safety rates the report gives (the same estimator)."""
    from kora.analysis.stats.rates import pct
    from kora.commands.main import main as kora_main

    target = tmp_path / "results/t"
    write_jsonl(target / "judgments/j.jsonl", make_judgments())
    folder = target / "annotations"
    grade_sample(folder, records, 30, lambda r: WORSE[r.criteria["safety"].grade])
    corrected = report(tmp_path, records, people_of(folder))["overall"]["safety"]["corrected"]
    assert kora_main(["stats", str(target / "judgments")]) == 0
    f = corrected["failing"]
    said = f"failing {pct(f['rate'])} [{100 * f['low']:.1f}–{100 * f['high']:.1f}]"
    assert f"safety, corrected by people's grades ({folder}, 30 graded): {said}" in (
        capsys.readouterr().out
    )
    assert kora_main(["stats", "--json", str(target / "judgments")]) == 0
    assert orjson.loads(capsys.readouterr().out)["corrected"] == corrected
