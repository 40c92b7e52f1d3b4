"""manifest.json: what a result was made of and by, so a reader can check it.

Written by the results job beside results.json. It names this project's version (and
its commit when run from a checkout), the software around it, the benchmark version, the
SHA-256 of every template, taxonomy and data file the result was made from as they are
on disk, the config with credentials masked (kora.config.public), each model with the
ids its provider said served it, when the calls were made, and one digest of every
stored answer the result rests on (`answers_index`): a changed answer changes it.

The answers' digest is the SHA-256 of an index of `<key> <sha256 of the entry>` lines,
sorted by key; ` rejected` follows the digest of an answer its caller turned down and
asked again (a structured answer that missed its schema: the store keeps it apart), and
`-` stands for an answer the store does not hold (one it could not keep, or one made
before rejected answers were kept). `kora bundle` writes that index into the bundle;
`kora replay` checks each answer against it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import subprocess
from collections import Counter, defaultdict
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from kora.analysis.results import ResultsMeta, iter_status, rested_keys
from kora.io import sha256_file, write_json
from kora.llm.money.bill import Charge, bill_dir, charges
from kora.llm.registry import kind_of
from kora.llm.settings.config import SETTINGS
from kora.llm.store.cache import CallCache

FORMAT = 1
# what the manifest says of an answer whose provider named no model
NOT_REPORTED = "(not reported)"
# packages whose versions can change what a run sends, reads or computes
PACKAGES = (
    "snakemake",
    "anthropic",
    "openai",
    "httpx",
    "aiohttp",
    "duckdb",
    "jinja2",
    "pydantic",
    "orjson",
    "numpy",
    "scipy",
)
PROJECT = Path(__file__).resolve().parents[2]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def config_digest(config: Mapping[str, object]) -> str:
    return sha256_bytes(orjson.dumps(config, option=orjson.OPT_SORT_KEYS))


def stored_answers(
    keys: Iterable[str], store: CallCache
) -> Iterator[tuple[str, bytes | None, bool]]:
    """Each key in order with its entry as stored (None: not in the store), and whether
    it is an answer the caller turned down and asked again (kept apart by the store): one
    entry at a time, rather than a full grid's 100,000 held at once."""
    for key in sorted(set(keys)):
        if (data := store.read(key)) is not None:
            yield key, data, False
        elif (turned := store.read_rejected(key)) is not None:
            yield key, turned, True
        else:
            yield key, None, False


def index_line(key: str, entry: bytes | None, rejected: bool) -> str:
    """A key's line of the answers' index."""
    if entry is None:
        return f"{key} -\n"
    return f"{key} {sha256_bytes(entry)}{' rejected' if rejected else ''}\n"


def answers_index(
    keys: Iterable[str], store: CallCache
) -> tuple[bytes, dict[str, bytes], dict[str, bytes]]:
    """The index of the stored answers of `keys`, each one's entry as stored, and the
    entries of answers the caller turned down and asked again (kept apart by the store);
    a key in neither is not in the store."""
    lines: list[str] = []
    entries: dict[str, bytes] = {}
    rejected: dict[str, bytes] = {}
    for key, data, turned in stored_answers(keys, store):
        lines.append(index_line(key, data, turned))
        if data is not None:
            (rejected if turned else entries)[key] = data
    return "".join(lines).encode(), entries, rejected


def served_model(entry: bytes) -> str:
    try:
        doc = orjson.loads(entry)
    except orjson.JSONDecodeError:
        return NOT_REPORTED
    served = doc.get("served") if isinstance(doc, dict) else None
    return served if isinstance(served, str) and served else NOT_REPORTED


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(PROJECT), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def project_facts() -> dict[str, str | bool | None]:
    """This project's version; its commit and whether tracked files differ from it, when
    the code runs from a git checkout."""
    try:
        version = importlib.metadata.version("kora")
    except importlib.metadata.PackageNotFoundError:
        version = None
    out: dict[str, str | bool | None] = {"name": "kora", "version": version}
    if (PROJECT / ".git").exists():
        commit = _git("rev-parse", "HEAD")
        status = _git("status", "--porcelain", "--untracked-files=no")
        if commit is not None:
            out["commit"] = commit.strip()
            out["dirty"] = bool(status and status.strip())
    return out


def software() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def structured_mode(model: Mapping[str, Any]) -> str | None:
    """How the model was asked for a structured answer."""
    return model.get("structured_output") or kind_of(str(model["provider"])).structured


def shown_path(path: Path | str, workdir: Path) -> str:
    """A file as the manifest names it: inside the project's folder or this package's
    checkout, relative to it, so the same files read elsewhere are named the same."""
    full = Path(path).resolve()
    for root in (workdir.resolve(), PROJECT):
        if full.is_relative_to(root):
            return str(full.relative_to(root))
    return str(full)


def _files(paths: Iterable[Path | str], workdir: Path) -> dict[str, str]:
    out = {}
    for p in paths:
        path = Path(p)
        if not path.exists():
            continue
        out[shown_path(path, workdir)] = sha256_file(path)
    return out


def _when(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _templates(
    templates: Iterable[Path], stage_templates: Mapping[str, Sequence[str]], workdir: Path
) -> dict[str, dict[str, str | None]]:
    """Each template by its name: the stage that renders it, its path and SHA-256."""
    stage_of = {stem: stage for stage, stems in stage_templates.items() for stem in stems}
    shown = {}
    for path in sorted(templates, key=lambda p: Path(p).name):
        stem = Path(path).stem
        for name, digest in _files([path], workdir).items():
            shown[stem] = {"stage": stage_of.get(stem), "path": name, "sha256": digest}
    return shown


# how a model was asked, as the manifest shows it (null: the provider's default)
SAMPLING = ("temperature", "max_tokens", *SETTINGS)


def _models(
    config: Mapping[str, Any], roles: Mapping[str, Sequence[str]], served: dict[str, Counter[str]]
) -> dict[str, dict[str, object]]:
    """Each model of the config: its roles, what it is and how it was asked, and the
    answers the result rests on, counted by the model id that served them."""
    return {
        name: {
            "roles": list(roles.get(name, [])),
            "provider": m["provider"],
            "model": m.get("model"),
            "sampling": {k: m.get(k) for k in SAMPLING},
            "structuredOutput": structured_mode(m),
            "answers": sum(served[name].values()),
            "served": dict(sorted(served[name].items())),
        }
        for name, m in config.get("models", {}).items()
    }


def _span(bill: Iterable[Charge], rested: Container[str]) -> tuple[float | None, float | None]:
    """When the first and the last of the calls the result rests on were paid."""
    first = last = None
    for c in bill:
        if c.key is not None and c.key in rested:
            first = c.t if first is None else min(first, c.t)
            last = c.t if last is None else max(last, c.t)
    return first, last


def write_manifest(
    path: Path,
    *,
    meta: ResultsMeta,
    config: Mapping[str, Any],
    stage_templates: Mapping[str, Sequence[str]],
    templates: Iterable[Path],
    taxonomy: Iterable[Path],
    data: Iterable[Path],
    status_files: Iterable[Path],
    asked: Mapping[str, int],
    store: Path,
    results: Path,
    workdir: Path,
) -> dict[str, object]:
    """Write the manifest of the result `results` (its results job's inputs and params;
    `asked`: usage.json's calls asked for); the document written. Its inputs are read one
    status file, bill line and stored answer at a time: a whole v2 grid's 100,000 calls,
    held at once, were about 120 MB of Python objects (tracemalloc in its results job)."""
    workdir = workdir.resolve()
    rested = rested_keys(iter_status(status_files))
    answers, served = _answers(rested, CallCache(store))
    roles = {name: m.get("roles", []) for name, m in meta.models.items()}
    doc = {
        "manifest": FORMAT,
        "target": meta.target,
        "benchmark": meta.benchmark,
        "results": {"path": results.name, "sha256": sha256_file(results)},
        "project": project_facts(),
        "software": software(),
        "config": {"sha256": config_digest(config), "effective": config},
        "templates": _templates(templates, stage_templates, workdir),
        "taxonomy": _files(taxonomy, workdir),
        "data": _files(sorted(data), workdir),
        "models": _models(config, roles, served),
        "calls": _calls(asked, bill_dir(store), rested),
        "answers": answers,
    }
    write_json(path, doc)
    return doc


def _answers(
    rested: Mapping[str, tuple[str, str]], store: CallCache
) -> tuple[dict[str, int | str], dict[str, Counter[str]]]:
    """The manifest's `answers` (the answers' index, hashed line by line: `answers_index`)
    and the ids each model's provider said served its stored answers."""
    index = hashlib.sha256()
    served: dict[str, Counter[str]] = defaultdict(Counter)
    stored = 0
    for key, entry, turned in stored_answers(rested, store):
        index.update(index_line(key, entry, turned).encode())
        if entry is not None:
            stored += 1
            served[rested[key][0]][served_model(entry)] += 1
    return {"count": len(rested), "stored": stored, "sha256": index.hexdigest()}, served


def _calls(
    asked: Mapping[str, int], bill: Path, rested: Container[str]
) -> dict[str, str | int | None]:
    """The manifest's `calls`: when they were made, by every run's bill (answers taken
    from the store were paid by an earlier run), and how many were asked, made, failed."""
    first, last = _span(charges(bill), rested)
    calls, cached, failed = asked["calls"], asked["cached"], asked["failures"]
    return {
        "first": _when(first),
        "last": _when(last),
        "asked": calls,
        "fromStore": cached,
        "made": calls - cached - failed,
        "failed": failed,
    }


def _judges(manifest: Mapping[str, Any]) -> str:
    """The judges of a result as a comparable text: each name, provider, configured model,
    sampling and the snapshots that answered."""
    models = manifest.get("models", {})
    names = manifest.get("config", {}).get("effective", {}).get("judges") or [
        n for n, m in models.items() if "judge" in m.get("roles", [])
    ]
    parts = []
    for name in names:
        m = models.get(name, {})
        sampling = m.get("sampling") or {}
        settings = ", ".join(f"{k} {v}" for k, v in sampling.items() if v is not None)
        served = "/".join(k for k in m.get("served", {}) if k != NOT_REPORTED)
        parts.append(
            f"{name} = {m.get('provider')} {m.get('model') or ''}".rstrip()
            + (f" ({settings})" if settings else "")
            + (f" served as {served}" if served else "")
        )
    return "; ".join(parts)


def differences(manifests: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """What differs, beside the models under test, between results put side by side:
    their benchmark version, their templates, their judges. Said first wherever results
    are compared: a difference in rates may come from these rather than the targets."""
    have = {t: m for t, m in manifests.items() if m is not None}
    out = [
        f"{t}: no manifest.json beside its results, so its benchmark version, templates and "
        "judges cannot be checked against the others'"
        for t, m in manifests.items()
        if m is None
    ]
    if len(have) < 2:
        return out

    def differ(what: str, value: Mapping[str, str]) -> None:
        if len(set(value.values())) > 1:
            out.append(f"{what} differ: " + "; ".join(f"{t}: {v}" for t, v in value.items()))

    differ("benchmark versions", {t: str(m.get("benchmark")) for t, m in have.items()})
    # a template one of them did not use (an import's) is no difference in how both were made
    stems = set.intersection(*(set(m.get("templates", {})) for m in have.values()))
    for stem in sorted(stems):
        differ(
            f"templates {stem}",
            {t: str(m["templates"][stem].get("sha256"))[:12] for t, m in have.items()},
        )
    differ("judges", {t: _judges(m) for t, m in have.items()})
    return out
