"""Models near or past their end of life, from the provider SDK's own table.

The Anthropic SDK ships the retirement dates of deprecated models; a run, `kora
check-config` and `kora plan` say so before any call, so a benchmark is not started on a
model that stops answering halfway.
"""

from __future__ import annotations

import ast
import datetime as dt
import importlib.util
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from kora.llm.settings.config import ModelConfig

# where SDK releases have defined the table, relative to the package
_TABLE_FILES = ("_data/deprecated_models.py", "_data.py", "resources/messages/messages.py")


def _anthropic_table() -> dict[str, str]:
    """The SDK's table of deprecated models, read from its source where a release defines
    it (importing the SDK costs the run's Snakemake process a second of CPU), else from
    the imported SDK. Looked up by name: the table is not part of the SDK's declared
    exports, and an SDK without it knows nothing."""
    spec = importlib.util.find_spec("anthropic")  # finds the package, imports nothing
    if spec is None or spec.origin is None:
        return {}
    for name in _TABLE_FILES:
        found = _literal_table(Path(spec.origin).parent / name)
        if found is not None:
            return found
    try:
        module = importlib.import_module("anthropic.resources.messages.messages")
    except ImportError:
        return {}
    table = getattr(module, "DEPRECATED_MODELS", None)
    return dict(table) if isinstance(table, dict) else {}


def _literal_table(source: Path) -> dict[str, str] | None:
    """`DEPRECATED_MODELS = {...}` as a file defines it; None where it does not."""
    try:
        tree = ast.parse(source.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        target: ast.expr
        value: ast.expr | None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "DEPRECATED_MODELS" and value:
            try:
                table = ast.literal_eval(value)
            except ValueError:
                return None
            return {str(k): str(v) for k, v in table.items()} if isinstance(table, dict) else None
    return None


def parse_date(text: str) -> dt.date | None:
    """'November 30th, 2026' -> 2026-11-30 (the SDK's form); None if not a date."""
    plain = re.sub(r"(\d+)(st|nd|rd|th)\b", r"\1", text.strip())
    for fmt in ("%B %d, %Y", "%Y-%m-%d"):
        try:
            return dt.datetime.strptime(plain, fmt).date()
        except ValueError:
            continue
    return None


def lifecycle_notes(
    models: Mapping[str, ModelConfig],
    names: Iterable[str],
    today: dt.date | None = None,
) -> list[str]:
    """One line per model among `names` that is deprecated or past its end of life, by
    the SDK's table (read only when one of the models is Anthropic's)."""
    today = today or dt.date.today()
    if not any(models[n].kind.retirements for n in set(names)):
        return []
    table = _anthropic_table()
    notes = []
    for name in sorted(set(names)):
        m = models[name]
        if not m.kind.retirements or not m.model or m.model not in table:
            continue
        when = table[m.model]
        date = parse_date(when)
        if date is not None and date <= today:
            notes.append(
                f"model {name!r} ({m.model}) reached its end of life on {when}: its calls "
                "will fail; choose a current model in config.yaml"
            )
        else:
            left = f" ({(date - today).days} days from now)" if date is not None else ""
            notes.append(
                f"model {name!r} ({m.model}) is deprecated and reaches its end of life on "
                f"{when}{left}; results made with it cannot be repeated after that"
            )
    return notes
