"""Reading a run's config files: config.yaml, then each `--configfile` overlay over it.

One loader serves the Snakefile, `kora check-config` and `kora plan`, so all three see the
same merged config and report a problem the same way: naming the file (and line, for YAML
problems) that holds the offending key, not the base file when the overlay is at fault.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kora import benchmarks
from kora.benchmarks.showcase import check_templates
from kora.benchmarks.taxonomy import Taxonomy
from kora.config.checks import validate_config
from kora.config.schema import KoraConfig, benchmark_of, taxonomy_dir_of
from kora.errors import ConfigError

BASE_CONFIG = "config.yaml"
SNAKEMAKE_NO_MAPPING = "Config file must be given as JSON or YAML with keys at top level."


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML mapping that sets a key twice is an error: PyYAML would keep the last one
    silently, and half of a user's edit would vanish."""


def _mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[object, int] = {}
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


def read_config_file(path: Path | str) -> dict[str, object]:
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
    # Snakemake reads each --configfile itself before the workflow and stops on these with
    # words that name no file: this message is the one that does
    if data is None:
        raise ConfigError(
            f"{path}: holds no keys; a config file maps keys at its top level "
            f"(Snakemake says of it: {SNAKEMAKE_NO_MAPPING!r})"
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: a {type(data).__name__} at its top level; a config file maps keys there "
            f"(Snakemake says of it: {SNAKEMAKE_NO_MAPPING!r})"
        )
    return data


def merge(base: Mapping[str, object], over: Mapping[str, object]) -> dict[str, object]:
    """`over` merged over `base` as Snakemake's update_config does: nested mappings merge,
    other values replace, and an empty mapping changes nothing."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict):
            below = out.get(k, {})
            out[k] = merge(below if isinstance(below, dict) else {}, v) if v else below
        else:
            out[k] = v
    return out


def merged(files: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """config.yaml's mapping (first) with the overlays' over it, in Snakemake's order:
    the overlays merged with one another first, then over config.yaml (so a key that one
    overlay drops and a later one sets again keeps config.yaml's other keys under it)."""
    if not files:
        return {}
    overlays: dict[str, object] = {}
    for raw in files[1:]:
        overlays = merge(overlays, raw)
    return merge(files[0], overlays)


def _sets(raw: Mapping[str, object], loc: str) -> bool:
    """Whether this file's mapping holds the key at the dotted path `loc`."""
    node: object = raw
    for part in loc.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def attribute(sources: Sequence[tuple[str, Mapping[str, object]]], loc: str) -> str:
    """The file that set `loc` last (or the deepest part of it any file sets)."""
    parts = loc.split(".") if loc else []
    for depth in range(len(parts), 0, -1):
        prefix = ".".join(parts[:depth])
        for name, raw in reversed(sources):
            if _sets(raw, prefix):
                return str(name)
    return str(sources[-1][0]) if sources else BASE_CONFIG


def config_paths(overlays: Sequence[Path | str], workdir: Path) -> list[Path]:
    """config.yaml of the project, then the overlays in their order (config.yaml among them
    too when given: Snakemake merges it there again)."""
    return [
        workdir / BASE_CONFIG,
        *(Path(p) if Path(p).is_absolute() else workdir / p for p in overlays),
    ]


def run_outputs_given(overlays: Sequence[Path | str], workdir: Path) -> list[str]:
    """The overlays that are files a run makes (under a version's results folder, or a
    report page; never a YAML file), as the user wrote them: targets typed after
    `--configfile`, which takes every value after it."""
    results = {benchmarks.get(n).results_dir for n in benchmarks.VERSIONS}
    found = []
    for p in overlays:
        path = Path(p) if Path(p).is_absolute() else workdir / p
        try:
            first = path.resolve().relative_to(workdir.resolve()).parts[0]
        except (ValueError, IndexError):
            first = ""
        if (first in results or path.suffix == ".html") and path.suffix not in (".yaml", ".yml"):
            found.append(str(_shown(path)))
    return found


def refuse_run_outputs(overlays: Sequence[Path | str], workdir: Path) -> None:
    made = run_outputs_given(overlays, workdir)
    if not made:
        return
    files = [str(_shown(Path(p))) for p in overlays if str(_shown(Path(p))) not in made]
    raise ConfigError(
        f"{made[0]}: a file the run makes, read as a config file: --configfile takes every "
        "value after it, so a target written after it is taken for one. Put the targets "
        f"before --configfile: {snakemake_command(made, files)}"
    )


def check_checkout(workdir: Path) -> None:
    """A workspace that is a checkout of kora (a Snakefile beside a kora/ package) runs
    its own package: another's (a second clone used with the first one's virtualenv, a
    copy installed without -e) would make the run with its code and templates, not these."""
    mine, used = workdir / "kora", Path(__file__).resolve().parents[1]
    checkout = (workdir / "Snakefile").is_file() and (mine / "__init__.py").is_file()
    if checkout and mine.resolve() != used:
        raise ConfigError(
            f"this folder is a checkout of kora, but Python runs the kora package in {used}, "
            "not this one's: its code and templates would make the run. Use this checkout's "
            "own virtualenv: python3 -m venv .venv && . .venv/bin/activate && pip install -e "
            "'.[dev]'"
        )


def snakemake_command(targets: Sequence[str], overlays: Sequence[str]) -> str:
    """A Snakemake command line to print for the user, runnable as printed: the targets
    before `--configfile` (which takes every value after it), then the run's overlays."""
    import shlex

    parts = ["snakemake", "--cores", "2", *targets]
    if overlays:
        parts += ["--configfile", *overlays]
    return shlex.join(parts)


def shown_overlays(overlays: Sequence[Path | str]) -> list[str]:
    """The overlays as a user types them: relative to the current folder when inside it
    (Snakemake hands the workflow absolute paths)."""
    return [str(_shown(Path(p))) for p in overlays]


def load_run_config(
    overlays: Sequence[Path | str] = (),
    *,
    workdir: Path | str = ".",
    values: dict[str, object] | None = None,
    given: dict[str, object] | None = None,
) -> tuple[KoraConfig, Taxonomy]:
    """The validated config of a run: config.yaml merged with `overlays` as Snakemake
    merges them, and `given` (the `--config KEY=VALUE` values, as Snakemake parses them)
    over those. The Snakefile reads a run's config files with it, and `kora check-config`
    and `kora plan` do too, so they accept exactly what a run accepts.

    `values` is the merged mapping when someone else merged it already (Snakemake); the
    files are still read, for their errors and to name the file (or `--config`) at fault.
    """
    workdir = Path(workdir)
    refuse_run_outputs(overlays, workdir)
    sources: list[tuple[str, dict[str, object]]] = []
    for path in config_paths(overlays, workdir):
        sources.append((str(_shown(path)), read_config_file(path)))
    sources += [("--config", given)] if given else []
    config_values = merged([raw for _, raw in sources]) if values is None else values
    bm = benchmark_of(config_values)
    taxonomy = bm.load_taxonomy(bm.taxonomy_paths(workdir / taxonomy_dir_of(config_values)))
    config = validate_config(
        config_values, taxonomy, workdir=workdir, source_of=lambda loc: attribute(sources, loc)
    )
    check_templates(benchmarks.get(config.benchmark), taxonomy, config.prompts_folder(workdir))
    return config, taxonomy
