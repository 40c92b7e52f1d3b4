"""`kora annotate --design stratified`: the sample that draws more of the conversations the
judge graded failing (kora.analysis.stats.design), its order whose every first part is a
stratified sample, the weights the report gives its grades, how many grades reach a
width, and grades imported from outside the drawn sample refused."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from kora.analysis.annotate import labels, sample
from kora.analysis.records import TestRecord, judged, load_records
from kora.analysis.stats.design import (
    FAILING,
    OTHER,
    START_GRADES,
    allocation,
    grades_for,
    guess,
    interleave,
    sequence,
    uniform_start,
)
from kora.errors import InputError
from tests.reportdata import TAXONOMY, make_judgments, results_doc, write_jsonl

pytestmark = pytest.mark.timeout(60)


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[TestRecord]:
    (tmp_path / ".kora").mkdir()  # a workspace, as a run leaves it
    monkeypatch.chdir(tmp_path)
    path = write_jsonl(tmp_path / "results/t/judgments/a/b/c.jsonl", make_judgments())
    return judged(load_records([path]))


def test_the_allocation_draws_more_of_the_judges_failing_conversations() -> None:
    """Neyman's allocation with the guess (half the judge's failing ones wrong; the rest
    failing as often as the judge flags): more than the stratum's share, at most half."""
    for share in (0.02, 0.05, 0.11, 0.3):
        a = allocation(share)
        assert share < a[FAILING] <= 0.5 and a[FAILING] + a[OTHER] == pytest.approx(1)
    # n_h in proportion to W_h S_h: W = 0.11, S = 1/2 and sqrt(0.11 x 0.89)
    s = 0.11 * 0.5 / (0.11 * 0.5 + 0.89 * (0.11 * 0.89) ** 0.5)
    assert allocation(0.11)[FAILING] == pytest.approx(s)
    assert allocation(0.6)[FAILING] == 0.6  # never fewer than its share
    # people's grades so far say the judge's failing ones are all failing: no variance
    # there, fewer of them drawn than their share
    sure = guess(0.11, {FAILING: (40.0, 40), OTHER: (20.0, 100)})
    assert allocation(0.11, sure)[FAILING] < 0.11


def test_every_first_part_of_the_order_holds_each_strata_share() -> None:
    sizes = {FAILING: 60, OTHER: 940}
    shares = {FAILING: 0.2, OTHER: 0.8}
    start = uniform_start(0.06, 0.2)
    assert START_GRADES == 5 and start == 84  # 5 / 0.06
    strata = sequence(sizes, shares, 1000, random.Random(1))
    assert Counter(strata) == Counter(sizes)  # every conversation once
    for n in range(start + 30, 300):  # after the uniform start and a catch-up
        assert abs(strata[:n].count(FAILING) - 0.2 * n) <= 1, n
    # before: a uniform draw (each place to a stratum by what is left of it)
    firsts = Counter(sequence(sizes, shares, 1, random.Random(seed))[0] for seed in range(3000))
    assert firsts[FAILING] / 3000 == pytest.approx(0.06, abs=0.015)


def test_a_judge_flagging_half_of_everything_gets_a_uniform_order() -> None:
    """The allocation cannot draw its failing stratum more often than its share: a
    sample of fixed parts (50 and 50 of 100) would gain nothing and hold the rate less
    often than a uniform one (bench/README.md), so the order is uniform draws throughout."""
    shares = allocation(0.5)
    assert uniform_start(0.5, shares[FAILING]) == float("inf")
    sizes = {FAILING: 500, OTHER: 500}
    counts = Counter(
        sequence(sizes, shares, 100, random.Random(seed)).count(FAILING) for seed in range(50)
    )
    assert len(counts) > 5  # not 50 every time


def test_interleave_puts_every_key_once_each_stratum_in_a_seeded_order() -> None:
    strata = {FAILING: [f"f{i}" for i in range(10)], OTHER: [f"o{i}" for i in range(90)]}
    keys = interleave(strata, {FAILING: 0.3, OTHER: 0.7}, seed=4)
    assert sorted(keys) == sorted(strata[FAILING] + strata[OTHER])
    assert keys == interleave(strata, {FAILING: 0.3, OTHER: 0.7}, seed=4)
    assert keys != interleave(strata, {FAILING: 0.3, OTHER: 0.7}, seed=5)


def test_grades_for_a_width_fall_as_the_width_grows_and_beat_peoples_alone() -> None:
    g = guess(0.11)
    narrow, alone = grades_for(0.04, 0.11, g)
    wide, _ = grades_for(0.08, 0.11, g)
    assert wide < narrow < alone
    # the normal approximation: at that many grades the interval is the width asked
    per_grade = sum(w * w * sd * sd / w for w, sd in ((0.11, g.sd(FAILING)), (0.89, g.sd(OTHER))))
    assert 2 * 1.96 * (per_grade / narrow) ** 0.5 == pytest.approx(0.04, rel=0.01)
    stratified, _ = grades_for(0.04, 0.11, g, allocation(0.11, g))
    assert stratified < narrow


def serve_nothing(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from kora.commands import annotate

    served: dict[str, Any] = {}

    def fake_serve(args: Any, records: Any, keys: list[str], path: Path, sample_id: Any) -> int:
        served.update(keys=keys, sample=sample_id)
        return 0

    monkeypatch.setattr(annotate, "serve", fake_serve)
    return served


def test_kora_annotate_draws_a_stratified_sample_and_says_how_many_grades_reach_a_width(
    project: list[TestRecord],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kora.commands.main import main as kora_main

    served = serve_nothing(monkeypatch)
    argv = ["annotate", "t", "--annotator", "ana", "--design", "stratified", "--size", "10",
            "--width", "0.3"]  # fmt: skip
    assert kora_main(argv) == 0
    err = capsys.readouterr().err
    doc = orjson.loads((tmp_path / "results/t/annotations" / sample.SAMPLE).read_bytes())
    assert doc is not None and doc["design"] == "stratified"
    failing = sorted(r.key for r in project if r.criteria["safety"].grade == "failing")
    assert doc["strata"] == {FAILING: failing} and sorted(doc["keys"]) == sorted(
        r.key for r in project
    )
    assert served["keys"] == doc["keys"][:10] and served["sample"] == doc["id"]
    assert "drew a stratified sample of 10 of the 40 judged conversations" in err
    assert "grades give the safety failing rate, corrected, a 95% interval 30% wide" in err
    assert "people's grades alone" in err
    # the design is the sample's: asking for the other one is refused, naming none is
    # going on with it
    assert kora_main(["annotate", "t", "--annotator", "ana", "--design", "uniform"]) == 2
    assert "--design stratified --seed 1" in capsys.readouterr().err
    assert kora_main(["annotate", "t", "--annotator", "ana", "--size", "4"]) == 0
    assert served["keys"] == doc["keys"][:4]
    # the drawn sample's size is fixed: the page offers it, and no more
    assert kora_main(["annotate", "t", "--annotator", "ana"]) == 0
    assert served["keys"] == doc["keys"][:10] and doc["size"] == 10
    assert kora_main(["annotate", "t", "--annotator", "ana", "--size", "11"]) == 2
    assert "the sample was drawn with --size 10" in capsys.readouterr().err
    assert kora_main(["annotate", "t", "--annotator", "ana", "--design", "stratified",
                      "--width", "2"]) == 2  # fmt: skip


def test_the_report_post_stratifies_a_stratified_sample_within_its_strata(
    project: list[TestRecord], tmp_path: Path
) -> None:
    """8 of the 40 conversations are the judge's failing ones. A stratified sample's first
    30 graded (past its uniform start of 25: 5 / 0.2), the person failing what the judge
    called adequate: the corrected rate is post-stratified on the judge's grade within
    the strata, and people's share alone is the stratified one, each stratum's share
    weighted by its conversations. Graded only within the uniform start, the sample is
    a uniform one: people's share alone is their plain share."""
    from kora.analysis.report.corrected import add_corrected, load_people
    from kora.analysis.report.summary import build_summary

    folder = tmp_path / "results/t/annotations"
    doc, _ = sample.ensure(folder, project, 3, "stratified")
    by_key = {r.key: r for r in project}

    def person(key: str) -> str:
        g = by_key[key].criteria["safety"].grade
        return "failing" if g in ("failing", "adequate") else g

    def corrected(graded: list[str]) -> dict[str, Any]:
        (folder / "ana.jsonl").unlink(missing_ok=True)
        answers = [{"key": k, "criterion": "safety", "grade": person(k), "queue": "estimate",
                    "sample": doc["id"]} for k in graded]  # fmt: skip
        labels.extend(labels.label_file(folder, "ana"), answers)
        people = load_people(sorted(folder.iterdir()))
        assert people is not None
        summary = build_summary(project, results_doc(), TAXONOMY)
        add_corrected(summary, project, people)
        return dict(summary["overall"]["safety"]["corrected"]["failing"])

    graded = doc["keys"][:30]
    c = corrected(graded)
    stratum = sample.stratum_of(doc)
    n = Counter(stratum[k] for k in graded)
    size = Counter(stratum[k] for k in by_key)
    assert n[FAILING] > 30 * size[FAILING] / 40  # drawn more often than their share
    y = {k: float(person(k) == "failing") for k in graded}
    alone = sum(size[s] / 40 * np.mean([y[k] for k in graded if stratum[k] == s]) for s in size)
    assert c["humansOnly"]["rate"] == pytest.approx(alone, abs=1e-6)
    # by the judge's grade (within its strata): failing, adequate, exemplary cells
    cells: dict[str, list[str]] = {}
    for k, r in by_key.items():
        cells.setdefault(r.criteria["safety"].grade, []).append(k)
    assert min(sum(k in y for k in keys) for keys in cells.values()) >= 2
    expected = sum(len(keys) / 40 * np.mean([y[k] for k in keys if k in y])
                   for keys in cells.values())  # fmt: skip
    assert c["rate"] == pytest.approx(expected, abs=1e-6)
    early = doc["keys"][:20]
    assert corrected(early)["humansOnly"]["rate"] == pytest.approx(
        np.mean([person(k) == "failing" for k in early]), abs=1e-6
    )
    # a judged conversation newer than the sample: no corrected rates, as for a uniform one
    del doc["keys"][0]
    (folder / "sample.json").write_bytes(orjson.dumps(doc))
    people = load_people(sorted(folder.iterdir()))
    assert people is not None
    fresh = build_summary(project, results_doc(), TAXONOMY)
    add_corrected(fresh, project, people)
    assert fresh["humanLabels"]["corrected"] is False


def test_grades_outside_the_drawn_sample_go_to_the_review_queue(
    project: list[TestRecord], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sample's size is written when it is drawn (--size 20 here): a grade of the
    31st conversation would be a hand-picked one. It goes to the review queue, said in
    one line, and the report's estimate leaves it out; a larger --size afterwards is
    refused (it would let what people saw decide how many grades count)."""
    from kora.analysis.report.corrected import load_people
    from kora.commands.main import main as kora_main

    folder = tmp_path / "results/t/annotations"
    first, late = sample.order(project, 1)[0], sample.order(project, 1)[30]
    src = tmp_path / "grades.jsonl"
    src.write_bytes(b"\n".join(orjson.dumps({"key": k, "criterion": "safety", "grade": "failing"})
                               for k in (first, late)))  # fmt: skip
    argv = ["annotate", "t", "--import", str(src), "--annotator", "ana"]
    assert kora_main([*argv, "--size", "20"]) == 0
    err = capsys.readouterr().err
    doc = orjson.loads((folder / sample.SAMPLE).read_bytes())
    assert doc is not None and doc["size"] == 20 and len(doc["keys"]) == 40
    assert ("1 of those conversations is not in the drawn sample (its first 20): their "
            "grades went to the review queue") in err  # fmt: skip
    queued = {a["key"]: a["queue"] for a in labels.lines(folder / "ana.jsonl")}
    assert queued == {first: "estimate", late: "review"}
    people = load_people(sorted(folder.iterdir()))
    assert people is not None and list(people.estimate["ana"]) == [first]
    assert kora_main([*argv, "--size", "40"]) == 2
    assert "the sample was drawn with --size 20" in capsys.readouterr().err


def test_a_sample_drawn_with_another_seed_or_design_is_refused(
    tmp_path: Path, project: list[TestRecord]
) -> None:
    folder = tmp_path / "annotations"
    doc, _ = sample.ensure(folder, project, 1, "stratified")
    assert sample.ensure(folder, project, 1, "stratified") == (doc, "")
    with pytest.raises(InputError, match="--design stratified --seed 1"):
        sample.ensure(folder, project, 1, "uniform")


def test_a_width_no_sample_of_the_run_can_reach_is_said_to_be_out_of_reach(
    project: list[TestRecord],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kora.commands.main import main as kora_main

    serve_nothing(monkeypatch)
    assert kora_main(["annotate", "t", "--annotator", "ana", "--width", "0.02"]) == 0
    err = capsys.readouterr().err
    assert "no number of grades of these 40 conversations gives" in err
    assert "a 95% interval 2% wide" in err
