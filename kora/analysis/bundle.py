"""A result's bundle: one zip file holding everything the result rests on, so that anyone
can rebuild it without a key or a network (`kora replay`, kora.run.rebuild).

Inside:

- `bundle.json`: what the bundle is, and the SHA-256 of every other member but the
  answers, and of the report (rebuilt, not carried: it is the largest file);
- `manifest.json`, the result's own (kora.analysis.manifest), which holds its config;
- the result's files as written: results.json, usage.json, and summary.json when the
  report was made of this result (else neither is bundled: a replay checks the rest);
- `prompts/<stem>.jinja`: the templates as the run read them, `taxonomy/`: its taxonomy;
- every data shard with its status file, at its path in the project: seeds, scenarios
  (and the ones validation turned down), conversations, judgments; and what a run takes
  as given: an import's record, recordings carried on, people's grades;
- `answers/<k[:2]>/<k>.json`: each stored answer the result rests on, the bytes of its
  line in the call store (`<k>.rejected.json`: one its caller turned down and asked again), and
  `answers.index`, whose SHA-256 is the manifest's answers digest.

Nothing is taken that the manifest does not name or that has changed since it was
written: a template edited, a shard rebuilt, an answer gone from the store stops the
bundle, naming the file. Members are written in a fixed order with a fixed time, so the
same result always gives the same bytes.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from kora.analysis.manifest import PROJECT, answers_index, sha256_bytes
from kora.analysis.results import read_status, rested_keys
from kora.benchmarks import layout
from kora.benchmarks.layout import MANIFEST
from kora.errors import KoraError
from kora.io import sha256_file, write_atomic
from kora.llm.base import Response
from kora.llm.store.cache import CallCache

FORMAT = 1
INDEX = "bundle.json"
ANSWERS_INDEX = "answers.index"
ANSWERS = "answers"
PROMPTS = "prompts"
TAXONOMY = "taxonomy"
# the result's own files carried as they are (the report only by its digest)
CARRIED = (layout.RESULTS, layout.SUMMARY, layout.USAGE)
_EPOCH = (1980, 1, 1, 0, 0, 0)


class BundleError(KoraError):
    """A result that cannot be bundled as it is, or a file that is not a bundle."""


def answer_member(key: str, rejected: bool = False) -> str:
    return f"{ANSWERS}/{key[:2]}/{key}{'.rejected' if rejected else ''}.json"


def _read_named(path: str, workdir: Path, expected: str, what: str) -> bytes:
    """A file the manifest names, checked against its digest there."""
    full = Path(path)
    if not full.is_absolute():
        found = [root / full for root in (workdir, PROJECT) if (root / full).exists()]
        full = found[0] if found else workdir / full
    try:
        data = full.read_bytes()
    except OSError as exc:
        raise BundleError(f"{what} {path}: {exc.strerror or exc}") from None
    if sha256_bytes(data) != expected:
        raise BundleError(
            f"{what} {path} changed since the result was made (its SHA-256 differs from the "
            "manifest's): run the workflow again, then bundle"
        )
    return data


def _optional(workdir: Path, rel: str | Path) -> Iterator[tuple[str, bytes]]:
    """A file or a folder's files the result may rest on, where they exist."""
    path = workdir / rel
    if path.is_file():
        yield str(Path(rel)), path.read_bytes()
    elif path.is_dir():
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            yield str(f.relative_to(workdir)), f.read_bytes()


@dataclass(frozen=True)
class Bundled:
    path: Path
    bytes: int
    files: int
    answers: int


def make_bundle(
    out: Path,
    *,
    workdir: Path,
    target_dir: str,
    extra: list[str],
    report: bool,
) -> Bundled:
    """Bundle the result in `target_dir` (relative to `workdir`) into `out`. `extra`:
    files and folders the run takes as given, carried where they exist (an import's
    record, recordings, people's grades); `report`: the report (summary.json and the
    digest of report.html) too, made of this result."""
    target = workdir / target_dir
    try:
        manifest_bytes = (target / MANIFEST).read_bytes()
    except OSError:
        raise BundleError(
            f"{target_dir}/{MANIFEST} not found: run the workflow for this target first "
            "(its results job writes the manifest)"
        ) from None
    manifest = orjson.loads(manifest_bytes)
    files = {MANIFEST: manifest_bytes}
    results = _read_named(
        f"{target_dir}/{layout.RESULTS}", workdir, manifest["results"]["sha256"], "results file"
    )
    files[f"{target_dir}/{layout.RESULTS}"] = results
    outputs = (
        {f"{target_dir}/{layout.REPORT}": sha256_file(target / layout.REPORT)} if report else {}
    )
    for name in (layout.SUMMARY, layout.USAGE) if report else (layout.USAGE,):
        try:
            files[f"{target_dir}/{name}"] = (target / name).read_bytes()
        except OSError:
            raise BundleError(f"{target_dir}/{name} not found: run the workflow again") from None
    status_files = _made_of(manifest, workdir, files)
    for rel in extra:
        for name, data in _optional(workdir, rel):
            files.setdefault(name, data)
    files[ANSWERS_INDEX], answers = _answers(manifest, workdir, status_files)
    doc = {
        "bundle": FORMAT,
        "target": manifest["target"],
        "benchmark": manifest["benchmark"],
        "targetDir": target_dir,
        "files": {n: sha256_bytes(d) for n, d in sorted(files.items())},
        "rebuiltOnly": outputs,
    }
    files[INDEX] = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    _write_zip(out, {**files, **answers})
    return Bundled(out, out.stat().st_size, len(files), len(answers))


def _made_of(manifest: Mapping[str, Any], workdir: Path, files: dict[str, bytes]) -> list[Path]:
    """Into `files`: the templates, taxonomy and data files the result was made of, each
    checked against the manifest's digest, and the data's status files; those returned."""
    for stem, t in manifest["templates"].items():
        files[f"{PROMPTS}/{stem}.jinja"] = _read_named(t["path"], workdir, t["sha256"], "template")
    for path, digest in manifest["taxonomy"].items():
        files[f"{TAXONOMY}/{Path(path).name}"] = _read_named(path, workdir, digest, "taxonomy file")
    status_files = []
    for path, digest in manifest["data"].items():
        files[path] = _read_named(path, workdir, digest, "data file")
        status = layout.status_of(path)  # a scenarios shard's rejected ones share it
        if status not in files and (workdir / status).exists():
            files[status] = (workdir / status).read_bytes()
            status_files.append(workdir / status)
    return status_files


def _answers(
    manifest: Mapping[str, Any], workdir: Path, status_files: list[Path]
) -> tuple[bytes, dict[str, bytes]]:
    """The index of the stored answers the result rests on, and their bundle members;
    refused where the store no longer holds them as the manifest says."""
    store = CallCache(workdir / manifest["config"]["effective"].get("cache_dir", layout.CACHE_DIR))
    keys = rested_keys(read_status(status_files))
    index, entries, rejected = answers_index(keys, store)
    if sha256_bytes(index) != manifest["answers"]["sha256"]:
        raise BundleError(
            "the call store no longer holds the answers this result rests on as they were "
            f"when it was made ({len(entries)} of {len(keys)} found): run the workflow "
            "again, then bundle"
        )
    members = {answer_member(key): data for key, data in entries.items()}
    members |= {answer_member(key, rejected=True): data for key, data in rejected.items()}
    return index, members


def _write_zip(out: Path, files: Mapping[str, bytes]) -> None:
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        for name in [INDEX, *sorted(n for n in files if n != INDEX)]:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, files[name])
    write_atomic(out, buf.getvalue())


class Bundle:
    """A bundle opened for reading."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.zip = zipfile.ZipFile(path)
            self.index: dict[str, Any] = orjson.loads(self.zip.read(INDEX))
            self.manifest: dict[str, Any] = orjson.loads(self.zip.read(MANIFEST))
        except KeyError:
            raise BundleError(f"{path}: not a result bundle: {self._why_not()}") from None
        except (OSError, zipfile.BadZipFile, orjson.JSONDecodeError) as exc:
            raise BundleError(f"{path}: not a result bundle ({exc})") from None
        if self.index.get("bundle") != FORMAT:
            raise BundleError(f"{path}: bundle format {self.index.get('bundle')!r} unknown")
        # a bundle packed again by another tool may list its folders too
        self.names = {n for n in self.zip.namelist() if not n.endswith("/")}

    def _why_not(self) -> str:
        """What a zip without the bundle's files at its top holds instead."""
        down = [n for n in self.zip.namelist() if n.endswith(f"/{INDEX}")]
        if down:
            folder = down[0].removesuffix(INDEX)
            return (
                f"its files are in the folder {folder} inside it; zip that folder's "
                f"contents (cd into it, then zip -r), not the folder"
            )
        return f"no {INDEX} or {MANIFEST} at its top"

    @property
    def target(self) -> str:
        return str(self.index["target"])

    @property
    def target_dir(self) -> str:
        return str(self.index["targetDir"])

    def read(self, name: str) -> bytes | None:
        if name not in self.names:
            return None
        return self.zip.read(name)

    def changed_files(self) -> list[str]:
        """Members whose bytes are not those bundle.json recorded (or that are gone)."""
        out = []
        for name, digest in self.index["files"].items():
            data = self.read(name)
            if data is None or sha256_bytes(data) != digest:
                out.append(name)
        return out

    def answer_keys(self) -> dict[str, tuple[str, bool]]:
        """Each answer's key, the SHA-256 its entry had (`-`: not in the store) and
        whether its caller turned it down (kora.analysis.manifest.answers_index)."""
        out = {}
        for line in (self.read(ANSWERS_INDEX) or b"").decode().splitlines():
            key, digest, *rest = line.split(" ")
            out[key] = (digest, rest == ["rejected"])
        return out

    def changed_answers(self) -> list[str]:
        """Keys whose stored answer is not the one the result rested on."""
        out = []
        for key, (digest, rejected) in self.answer_keys().items():
            data = self.read(answer_member(key, rejected))
            if digest == "-":
                if data is not None:
                    out.append(key)
            elif data is None or sha256_bytes(data) != digest:
                out.append(key)
        return out

    def rejected(self, key: str) -> Response | None:
        """The answer of `key` its caller turned down in the run, if it was kept."""
        return CallCache.parse(key, self.read(answer_member(key, rejected=True)))

    def files_under(self, prefix: str) -> list[str]:
        return sorted(n for n in self.names if n.startswith(prefix))

    def close(self) -> None:
        self.zip.close()


class BundleStore(CallCache):
    """The call store of a bundle: its answers only, read from the zip; answers a replay
    makes (none should be) are kept in memory."""

    def __init__(self, bundle: Bundle) -> None:
        super().__init__(Path(".kora-bundle-store"))
        self.bundle = bundle
        self.memory: dict[str, Response] = {}
        self.used: set[str] = set()

    def read(self, key: str) -> bytes | None:
        data = self.bundle.read(answer_member(key))
        if data is not None:
            self.used.add(key)
        return data

    def get(self, key: str) -> Response | None:
        if key in self.memory:
            return self.memory[key]
        return super().get(key)

    def put(self, key: str, response: Response) -> None:
        self.memory[key] = response

    def put_rejected(self, key: str, response: Response) -> None:
        return None  # the bundle is read, never written
