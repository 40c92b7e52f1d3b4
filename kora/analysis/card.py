"""The dataset card of an exported result (`kora export TARGET --hf DIR`): a README.md whose
front matter tells Hugging Face `datasets` where the table is, and whose text says what
the benchmark is, what the manifest records of how the result was made, the columns, and
the licence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from kora import benchmarks
from kora.analysis.parquet import COLUMN_DOCS

DATA_FILE = "data/conversations.parquet"
LICENCE = "apache-2.0"


def _size(rows: int) -> str:
    for bound, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if rows < bound:
            return name
    return "100K<n<1M"


def _models(manifest: Mapping[str, Any]) -> list[str]:
    lines = []
    for name, m in manifest.get("models", {}).items():
        served = ", ".join(f"`{k}` ({v})" for k, v in m.get("served", {}).items()) or "none"
        configured = f" `{m['model']}`" if m.get("model") else ""
        sampling = ", ".join(
            f"{k} {v}" for k, v in (m.get("sampling") or {}).items() if v is not None
        )
        lines.append(
            f"- **{name}** ({', '.join(m.get('roles', []))}): {m['provider']}{configured}; "
            f"answers by the model id the provider gave: {served}"
            + (f"; {sampling}" if sampling else "")
        )
    return lines


def dataset_card(manifest: Mapping[str, Any], results: Mapping[str, Any], rows: int) -> str:
    target = str(manifest["target"])
    version = str(manifest.get("benchmark", benchmarks.DEFAULT))
    front = {
        "license": LICENCE,
        "pretty_name": f"KORA {version} child-safety results: {target}",
        "language": ["en"],
        "tags": ["child-safety", "safety-evaluation", "llm-as-judge", "kora"],
        "size_categories": [_size(rows)],
        "configs": [
            {"config_name": "default", "data_files": [{"split": "test", "path": DATA_FILE}]}
        ],
    }
    mock = (
        ["", "**Made with the offline mock provider: the figures measure nothing.**"]
        if results.get("mock")
        else []
    )
    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False).rstrip(),
        "---",
        "",
        f"# KORA {version} child-safety results: {target}",
        *mock,
        "",
        "KORA measures how safely a chat model talks with children. A simulated child of",
        "7 to 17, moved by one of ten motivations, starts a conversation about one risk of",
        "the taxonomy (violence, grooming, self-harm, scams and others); the model under",
        "test answers, with or without being told it speaks with a child; one or more",
        "LLM judges then grade the conversation for safety (failing, adequate, exemplary)",
        "and for the behaviours around it. This table holds every test of one model: the",
        "scenario, the whole conversation, and each judge's grades with their reasons.",
        "",
        f"- tests: {results.get('tests', 0):,} graded, {results.get('failedTests', 0):,} failed "
        f"({rows:,} rows; `graded` tells them apart)",
        "",
        *_how_it_was_made(manifest, version),
        "",
        "## Columns",
        "",
        "| column | what it holds |",
        "|---|---|",
        *(f"| `{c}` | {d} |" for c, d in COLUMN_DOCS.items()),
        "",
        "## Licence",
        "",
        "Apache-2.0, the licence of the KORA pipeline that made it. The child's messages and",
        "the scenarios were written by the models named above, the replies by the model",
        "under test: their providers' terms may also apply to that text.",
        "",
    ]
    return "\n".join(lines)


def _how_it_was_made(manifest: Mapping[str, Any], version: str) -> list[str]:
    """The card's section on what the manifest records: version, models, calls, digests."""
    project = manifest.get("project", {})
    made_by = f"kora {project.get('version') or '(version unknown)'}"
    if project.get("commit"):
        made_by += f", commit {project['commit'][:12]}"
        made_by += " with uncommitted changes" if project.get("dirty") else ""
    calls = manifest.get("calls", {})
    answers = manifest.get("answers", {})
    return [
        "## How it was made",
        "",
        "From `manifest.json`, beside the table:",
        "",
        f"- made by {made_by}; benchmark {version}",
        *_models(manifest),
        f"- calls from {calls.get('first')} to {calls.get('last')} (UTC)",
        f"- results.json SHA-256 `{manifest.get('results', {}).get('sha256')}`",
        f"- the {answers.get('count', 0):,} stored answers the result rests on, digest "
        f"`{answers.get('sha256')}`",
        f"- config SHA-256 `{manifest.get('config', {}).get('sha256')}` (credentials masked)",
        "",
        "| template | SHA-256 |",
        "|---|---|",
        *(f"| {s} | `{t['sha256']}` |" for s, t in manifest.get("templates", {}).items()),
    ]
