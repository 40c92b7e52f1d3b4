"""Deprecated models are named before a run, from the SDK's own dates."""

from __future__ import annotations

import datetime as dt
import importlib
import json

import pytest

from kora.config.files import load_run_config
from kora.llm import lifecycle
from kora.llm.lifecycle import lifecycle_notes, parse_date
from tests.helpers import REPO


def test_the_sdk_dates_parse() -> None:
    assert parse_date("November 30th, 2026") == dt.date(2026, 11, 30)
    assert parse_date("June 1st, 2026") == dt.date(2026, 6, 1)
    assert parse_date("soon") is None


def test_deprecated_and_retired_models_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, _ = load_run_config(workdir=REPO)
    cfg.models["sonnet"].model = "claude-old-1"
    monkeypatch.setattr(
        lifecycle, "_anthropic_table", lambda: {"claude-old-1": "November 30th, 2026"}
    )
    before = lifecycle_notes(cfg.models, ["sonnet"], dt.date(2026, 11, 22))
    assert len(before) == 1 and "deprecated" in before[0] and "8 days" in before[0]
    after = lifecycle_notes(cfg.models, ["sonnet"], dt.date(2026, 12, 1))
    assert "reached its end of life" in after[0] and "will fail" in after[0]


@pytest.mark.slow
def test_the_shipped_config_uses_no_model_the_sdk_retires() -> None:
    cfg, _ = load_run_config(workdir=REPO)
    assert lifecycle_notes(cfg.models, cfg.models) == []


def test_the_installed_sdk_table_is_read() -> None:
    # the SDK's table is looked up by name (it is not a declared export); a model it lists
    # is named with no table passed in, so a renamed or moved table shows up here
    module = importlib.import_module("anthropic.resources.messages.messages")
    sdk_table = module.DEPRECATED_MODELS
    listed = sorted(sdk_table)[0]
    cfg, _ = load_run_config(workdir=REPO)
    cfg.models["sonnet"].model = listed
    notes = lifecycle_notes(cfg.models, ["sonnet"], dt.date(2000, 1, 1))
    assert len(notes) == 1 and listed in notes[0] and sdk_table[listed] in notes[0]


def test_the_table_is_read_without_importing_the_sdk() -> None:
    """The run's Snakemake process reads the table from the SDK's source: the same table
    the imported SDK holds, without the second of CPU that importing it costs."""
    import subprocess
    import sys

    code = (
        "import sys, json; from kora.llm.lifecycle import _anthropic_table; "
        "t = _anthropic_table(); print(json.dumps([t, 'anthropic' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    table, imported = json.loads(out.stdout)
    module = importlib.import_module("anthropic.resources.messages.messages")
    assert table == dict(module.DEPRECATED_MODELS) and table
    assert not imported
