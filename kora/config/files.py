"""Reading a run's config files: config.yaml, then each `--configfile` overlay over it.

One loader serves the Snakefile, `kora check-config` and `kora plan`, so all three see the
same merged config and report a problem the same way: naming the file (and line, for YAML
problems) that holds the offending key, not the base file when the overlay is at fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from kora.benchmarks.taxonomy import Taxonomy
from kora.config.checks import validate_config
from kora.config.schema import KoraConfig, benchmark_of, taxonomy_dir_of
from kora.errors import ConfigError

BASE_CONFIG = "config.yaml"


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML mapping that sets a key twice is an error: PyYAML would keep the last one
    silently, and half of a user's edit would vanish."""


def _mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if isinstance(key, list | dict | set):
            raise ConfigError(
                f"{getattr(loader, 'path', '?')}:{line}: a key that is a "
                f"{type(key).__name__}; keys are names"
            )
        if key in seen:
            raise ConfigError(
                f"{getattr(loader, 'path', '?')}:{line}: duplicate key {key!r} "
                f"(first set on line {seen[key]})"
            )
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _mapping,
)


def _shown(path: Path) -> Path:
    """A path as the user would type it: relative to the current folder when inside it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def read_config_file(path: Path | str) -> dict[str, Any]:
    """One config file as a mapping; errors name the file, and the line where YAML knows it."""
    path = _shown(Path(path))
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    try:
        loader = _UniqueKeyLoader(text)  # reads the text: a character YAML refuses is named
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    loader.path = str(path)  # type: ignore[attr-defined]
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        # YAML often notices a problem a line after its cause (an unclosed bracket): name
        # the line the unfinished part began on too
        began = exc.context_mark
        since = (
            f" ({exc.context} on line {began.line + 1})"
            if began and exc.context and mark and began.line != mark.line
            else ""
        )
        raise ConfigError(f"{where}: not valid YAML: {exc.problem or exc.context}{since}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Snakemake's --configfile rule: nested mappings merge, other values replace."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def _sets(raw: dict[str, Any], loc: str) -> bool:
    """Whether this file's mapping holds the key at the dotted path `loc`."""
    node: Any = raw
    for part in loc.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def attribute(sources: Sequence[tuple[str, dict[str, Any]]], loc: str) -> str:
    """The file that set `loc` last (or the deepest part of it any file sets)."""
    parts = loc.split(".") if loc else []
    for depth in range(len(parts), 0, -1):
        prefix = ".".join(parts[:depth])
        for name, raw in reversed(sources):
            if _sets(raw, prefix):
                return str(name)
    return str(sources[-1][0]) if sources else BASE_CONFIG


def config_paths(overlays: Sequence[Path | str], workdir: Path) -> list[Path]:
    """config.yaml of the project, then the overlays (not config.yaml twice)."""
    base = workdir / BASE_CONFIG
    paths = [base]
    for p in overlays:
        path = Path(p) if Path(p).is_absolute() else workdir / p
        if path.resolve() != base.resolve():
            paths.append(path)
    return paths


def load_run_config(
    overlays: Sequence[Path | str] = (),
    *,
    workdir: Path | str = ".",
    values: dict[str, Any] | None = None,
) -> tuple[KoraConfig, Taxonomy]:
    """The validated config of a run: config.yaml merged with `overlays`, in order.

    `values` is the merged mapping when someone else merged it already (Snakemake, which
    also applies `--config key=value`); the files are still read, for their errors and to
    name the file at fault.
    """
    workdir = Path(workdir)
    sources: list[tuple[str, dict[str, Any]]] = []
    merged: dict[str, Any] = {}
    for path in config_paths(overlays, workdir):
        raw = read_config_file(path)
        sources.append((str(_shown(path)), raw))
        merged = merge(merged, raw)
    if values is not None:
        merged = values
    bm = benchmark_of(merged)
    taxonomy = bm.load_taxonomy(bm.taxonomy_paths(workdir / taxonomy_dir_of(merged)))
    config = validate_config(
        merged, taxonomy, workdir=workdir, source_of=lambda loc: attribute(sources, loc)
    )
    return config, taxonomy
