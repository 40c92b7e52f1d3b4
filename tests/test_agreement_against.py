"""`kora agreement --against PREVIOUS`: is the new judge better? The change in agreement
with people per criterion, worked out by hand and with scikit-learn's kappa, from a saved
agreement result or an earlier judgments folder, and shown in the report."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from sklearn.metrics import cohen_kappa_score

from kora.analysis.annotate import labels
from kora.analysis.records import judged, load_records
from kora.analysis.stats.against import compare, people_grade
from kora.errors import InputError
from tests.reportdata import make_judgments, write_jsonl

pytestmark = pytest.mark.timeout(60)
GRADES = ["failing", "adequate", "exemplary"]


def test_peoples_grade_is_their_median_the_stricter_when_even() -> None:
    people = {
        "a": {"k": {"safety": {"grade": "exemplary"}, "x": {"notTriggered": True}}},
        "b": {"k": {"safety": {"grade": "failing"}}},
        "c": {"k": {"safety": {"grade": "adequate"}, "x": {"grade": "failing"}}},
    }
    assert people_grade(people, "k", "safety") == "adequate"
    assert people_grade({n: people[n] for n in "ab"}, "k", "safety") == "failing"
    assert people_grade(people, "k", "x") is None  # someone found it not triggered
    assert people_grade(people, "other", "safety") is None


def test_the_change_in_agreement_by_hand_and_kappa_by_scikit_learn() -> None:
    """60 conversations; the old judge agrees with the person on 30, the new one on 48,
    never worse where the old one agreed: +30 points, significant."""
    person = [GRADES[i % 3] for i in range(60)]
    old = [g if i < 30 else GRADES[(GRADES.index(g) + 1) % 3] for i, g in enumerate(person)]
    new = [g if i < 48 else old[i] for i, g in enumerate(person)]
    keys = [f"k{i}" for i in range(60)]
    people = {"ana": {k: {"safety": {"grade": g}} for k, g in zip(keys, person, strict=True)}}
    f = compare({k: {"safety": g} for k, g in zip(keys, old, strict=True)},
                {k: {"safety": g} for k, g in zip(keys, new, strict=True)},
                people, ["safety", "humanRedirection"], seed=3)["safety"]  # fmt: skip
    assert (f["n"], f["agreement_old"], f["agreement_new"]) == (60, 0.5, 0.8)
    assert f["agreement_change"] == pytest.approx(0.3) and f["significant"]
    assert f["agreement_low"] > 0 and f["agreement_low"] < 0.3 < f["agreement_high"]
    k_old = cohen_kappa_score(person, old, labels=GRADES, weights="quadratic")
    k_new = cohen_kappa_score(person, new, labels=GRADES, weights="quadratic")
    assert f["kappa_change"] == pytest.approx(k_new - k_old, abs=1e-4)
    # the same judge twice: no change, not significant
    same = compare({k: {"safety": g} for k, g in zip(keys, old, strict=True)},
                   {k: {"safety": g} for k, g in zip(keys, old, strict=True)},
                   people, ["safety"])["safety"]  # fmt: skip
    assert same["agreement_change"] == 0 and not same["significant"]
    with pytest.raises(InputError, match="graded none"):
        compare({}, {"k0": {"safety": "failing"}}, people, ["safety"])


def _rejudged(better: int) -> list[Any]:
    """The fixture run re-judged: safety exemplary for the first `better` tests the
    person called exemplary where the old judge said otherwise."""
    out, changed = [], 0
    for j in make_judgments():
        j = j.model_copy(deep=True)
        if j.assessment is not None and j.assessment.grade != "exemplary" and changed < better:
            j.assessment.grade = "exemplary"
            changed += 1
        out.append(j)
    return out


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_kora_agreement_against_a_saved_result_or_earlier_judgments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kora.commands.main import main as kora_main

    (tmp_path / ".kora").mkdir()  # a workspace, as a run leaves it
    monkeypatch.chdir(tmp_path)
    shard = tmp_path / "results/t/judgments/a/b/c.jsonl"
    write_jsonl(shard, make_judgments())
    records = judged(load_records([shard]))
    folder = tmp_path / "results/t/annotations"
    # the person calls every conversation exemplary on safety
    labels.extend(labels.label_file(folder, "ana"), [
        {"key": r.key, "criterion": "safety", "grade": "exemplary", "queue": "judges"}
        for r in records
    ])  # fmt: skip
    assert kora_main(["agreement", "t"]) == 0
    saved = orjson.loads((tmp_path / "results/t/agreement.json").read_bytes())
    assert saved["judgeGrades"][records[0].key]["safety"] == records[0].criteria["safety"].grade
    shutil.copytree(tmp_path / "results/t/judgments", tmp_path / "judgments-before")
    exemplary_before = sum(r.criteria["safety"].grade == "exemplary" for r in records)
    # the judge prompt was edited and the judging ran again: 10 more agree with ana
    write_jsonl(shard, _rejudged(10))
    capsys.readouterr()
    assert kora_main(["agreement", "t", "--against", "results/t/agreement.json"]) == 0
    out = capsys.readouterr().out
    doc = orjson.loads((tmp_path / "results/t/agreement.json").read_bytes())
    f = doc["against"]["criteria"]["safety"]
    assert f["n"] == 40 and f["agreement_old"] == round(exemplary_before / 40, 4)
    assert f["agreement_new"] == round((exemplary_before + 10) / 40, 4) and f["significant"]
    assert "safety: n 40" in out and "significantly better" in out
    # the earlier judgments folder says the same
    assert kora_main(["agreement", "t", "--against", "judgments-before"]) == 0
    again = orjson.loads((tmp_path / "results/t/agreement.json").read_bytes())
    assert again["against"]["criteria"]["safety"] == f
    # the report shows it, and keeps the grades out of summary.json
    from kora.analysis.report.pages import write_report
    from tests.reportdata import TAXONOMY, results_doc

    summary = write_report(load_records([shard]), results_doc(), tmp_path / "r.html",
                           tmp_path / "s.json", TAXONOMY, again)  # fmt: skip
    assert "judgeGrades" not in summary["humanAgreement"] and "against" in summary["humanAgreement"]
    html = (tmp_path / "r.html").read_text()
    assert 'id="judge-change"' in html and "significantly better" in html
    # a file that holds no judges' grades is refused, named
    old = {k: v for k, v in saved.items() if k != "judgeGrades"}
    (tmp_path / "old.json").write_bytes(orjson.dumps(old))
    assert kora_main(["agreement", "t", "--against", "old.json"]) == 2
    assert capsys.readouterr().err.startswith("kora: error: old.json: ")
