"""Issue 25, item 4, in a whole run: a target that echoes its own bearer token in its
normal replies. The token (raw, JSON-escaped, percent-encoded, inside base64) reaches no
file the run writes (shards, results, report, logs, call store, Snakemake's metadata);
the records and the report say that replies were masked."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.helpers import copy_workflow
from tests.misbehaving import Misbehaving, echo_token, token_forms
from tests.workflows import TINY, snakemake

pytestmark = pytest.mark.slow

TOKEN = "echo-secret/0123+abcd"


@pytest.mark.timeout(600)
def test_an_echoed_token_is_written_nowhere_and_the_report_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_TOKEN", TOKEN)
    copy_workflow(tmp_path)
    with Misbehaving() as srv:
        srv.every(echo_token("I saw your key: "))
        cfg: dict[str, Any] = copy.deepcopy(TINY)
        cfg["models"] = {
            "echo": {
                "provider": "http",
                "base_url": srv.url,
                "http": {
                    "headers": {"Authorization": "Bearer ${ECHO_TOKEN}"},
                    "turn": {"url": "/chat", "body": {"q": "{{ message }}"}, "reply": "reply"},
                },
            }
        }
        cfg["targets"] = {"echo": {"model": "echo", "prompts": ["child"]}}
        (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
        run = snakemake(tmp_path, "results/echo/report.html")
        assert srv.count > 0
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]

    turns = [
        (m, t)
        for f in (tmp_path / "results/echo/conversations").rglob("*.jsonl")
        for line in f.read_bytes().splitlines()
        for c in [orjson.loads(line)]
        for m, t in zip([m for m in c["messages"] if m["role"] == "assistant"], c["turns"],
                        strict=True)
    ]  # fmt: skip
    assert turns and all(t.get("masked") is True for _, t in turns)
    assert all(m["content"].startswith("I saw your key: ****") for m, _ in turns)
    page = (tmp_path / "results/echo/report.html").read_text()
    assert "held a secret of the target" in page

    forms = [f.encode() for f in token_forms(TOKEN)] + [b"0123+abcd", b"0123%2Babcd"]
    checked = 0
    for f in tmp_path.rglob("*"):
        if f.is_file() and not f.is_symlink():
            data = f.read_bytes()
            checked += 1
            for form in forms:
                assert form not in data, (f, form)
    assert checked > 20 and (tmp_path / ".snakemake").is_dir()
    assert os.environ["ECHO_TOKEN"] == TOKEN
