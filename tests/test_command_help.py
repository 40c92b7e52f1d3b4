"""`kora X --help` says what X does and what each of its arguments is; `kora stats` gives
each share's interval and says when the tests it reads were made with the mock provider."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import orjson
import pytest

from kora.analysis.stats.rates import wilson
from kora.commands.main import build_parser
from kora.commands.main import main as kora_main
from tests.reportdata import make_judgments, write_jsonl


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.timeout(60)
def test_every_subcommand_describes_itself_and_each_argument() -> None:
    missing = []
    for name, parser in subcommands().items():
        if not parser.description:
            missing.append(f"kora {name}: no description")
        missing += [
            f"kora {name} {'/'.join(a.option_strings) or a.dest}: no help"
            for a in parser._actions
            if not a.help or a.help == argparse.SUPPRESS
        ]
        parser.format_help()  # a help string argparse cannot format fails here
    assert missing == []
    assert len(subcommands()) >= 14


def _write(folder: Path) -> Path:
    return write_jsonl(
        folder / "judgments" / "cybersecurity" / "10to12" / "m.jsonl", make_judgments()
    )


@pytest.mark.timeout(60)
def test_stats_gives_each_share_its_wilson_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = str(_write(tmp_path / "t").parent)
    assert kora_main(["stats", "--json", given]) == 0
    counts = orjson.loads(capsys.readouterr().out)["criteria"]["safety"]["counts"]
    n = sum(counts.values())
    assert kora_main(["stats", given]) == 0
    out, err = capsys.readouterr()
    row = next(line for line in out.splitlines() if line.startswith("safety"))
    shown = re.findall(r"(\d+) (\d+\.\d)% \[(\d+\.\d)–(\d+\.\d)\]", row)
    assert len(shown) == 3 and len({c for c in counts.values()}) > 1
    for (k, share, low, high), grade in zip(
        shown, ("failing", "adequate", "exemplary"), strict=True
    ):
        assert int(k) == counts[grade]
        w = wilson(counts[grade], n)
        assert (share, low, high) == tuple(f"{100 * x:.1f}" for x in (counts[grade] / n, *w))
    assert "95% Wilson interval" in out
    assert "mock" not in err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("beside", ["results.json", "status"])
def test_stats_warns_when_the_mock_provider_made_the_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], beside: str
) -> None:
    shard = _write(tmp_path / "t")
    if beside == "results.json":
        (tmp_path / "t" / "results.json").write_bytes(orjson.dumps({"mock": True}))
        given = shard  # a single shard, four folders below its target's results.json
    else:  # no results.json yet: the shards' status files name the judges' provider
        models = {"judges": [{"name": "m", "provider": "mock", "model": None}]}
        status = shard.with_name("m.status.json")
        status.write_bytes(orjson.dumps({"models": models}))
        given = tmp_path / "t" / "judgments"
    assert kora_main(["stats", str(given)]) == 0
    err = capsys.readouterr().err
    assert re.search(r"warning: .*offline mock provider.*measure nothing", err)
    assert kora_main(["stats", "--json", str(given)]) == 0
    assert orjson.loads(capsys.readouterr().out)["mock"] is True


@pytest.mark.timeout(60)
def test_stats_does_not_warn_of_a_real_provider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shard = _write(tmp_path / "t")
    models = {"judges": [{"name": "s", "provider": "anthropic", "model": "x"}]}
    shard.with_name("m.status.json").write_bytes(orjson.dumps({"models": models}))
    assert kora_main(["stats", "--json", str(tmp_path / "t" / "judgments")]) == 0
    out, err = capsys.readouterr()
    assert "mock" not in orjson.loads(out) and "warning" not in err
    (tmp_path / "t" / "results.json").write_bytes(orjson.dumps({"target": "t"}))
    assert kora_main(["stats", str(shard)]) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "command",
    [["compare-targets", "t", "u"], ["annotate", "t", "--annotator", "ana", "--queue", "judges"]],
    ids=["compare-targets", "annotate"],
)
def test_compare_targets_and_annotate_warn_of_mock_results_as_stats_does(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    from kora.commands import annotate

    (tmp_path / ".kora").mkdir()  # a workspace, as a run leaves it
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(annotate, "serve", lambda *args: 0)  # no grading page
    for name in ("t", "u"):
        _write(tmp_path / "results" / name)
    results = tmp_path / "results" / "t" / "results.json"
    results.write_bytes(orjson.dumps({"target": "t", "mock": True}))
    assert kora_main(command) == 0
    err = capsys.readouterr().err
    assert re.search(r"warning: .*offline mock provider \(results/t/results.json\)", err), err
    assert re.search(r"its answers are placeholders, so .* nothing", err)
    results.write_bytes(orjson.dumps({"target": "t"}))
    assert kora_main(command) == 0
    assert "warning" not in capsys.readouterr().err
