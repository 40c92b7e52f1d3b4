"""What the `kora` subcommands share: the workspace they run in, found from any folder
inside it; the project's config as the command line gives it (config.yaml with any
--configfile merged over it), its benchmark version, taxonomy and folders."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kora.benchmarks.layout import KORA_DIR, Layout
from kora.errors import ConfigError, KoraError

if TYPE_CHECKING:
    from kora.benchmarks.base import Benchmark
    from kora.benchmarks.taxonomy import Taxonomy


# what makes a folder a workspace, as .git makes a repository: a Snakefile or the .kora
# folder a run leaves; else config.yaml, where no folder above holds either (a Snakemake
# profile's own config.yaml, profiles/default/, is no workspace)
MARKS = (("Snakefile", KORA_DIR), ("config.yaml",))
# the commands that read only the files they are given: they run outside a workspace too
ANYWHERE = {"aggregate", "compare", "compare-targets", "stats", "replay"}
# the options (by `dest`) that name a file, typed relative to the current folder; and those
# that name a file only when there is one where they were typed (else a target's name)
PATHS = {"path", "paths", "file", "scenario", "output", "hf", "keep", "bundle", "manifest"}
PATHS |= {"reference", "import_file", "taxonomy"}
PATHS_OR_NAMES = {"configfile", "a", "b", "against"}
CONFIG_ENDINGS = (".yaml", ".yml", ".json")  # a config file's name, before it exists


def find_workspace(start: Path) -> Path | None:
    """The workspace `start` is in: the nearest folder at or above it with a mark."""
    for marks in MARKS:
        for folder in (start, *start.parents):
            if any((folder / m).exists() for m in marks):
                return folder
    return None


@contextlib.contextmanager
def in_workspace(args: argparse.Namespace) -> Iterator[None]:
    """Run a command in its workspace, found from the current folder up (a command's files
    are the workspace's: config.yaml, results/, .kora/), the paths typed on its command
    line made to name the same files from there; a command that needs one (not in
    ANYWHERE) refuses to run outside one."""
    here = Path.cwd()
    root = find_workspace(here)
    if root is None:
        if args.command not in ANYWHERE:
            raise KoraError(
                f"no KORA workspace in {here} or any folder above it (looked for a "
                "Snakefile, a .kora folder or config.yaml)"
            )
        yield
        return
    if root != here:
        args.away = os.path.relpath(root, here)  # for the commands printed (run_command)
        for name in PATHS | PATHS_OR_NAMES:
            value = getattr(args, name, None)
            if isinstance(value, list):
                setattr(args, name, [_from(root, here, v, name in PATHS) for v in value])
            elif isinstance(value, str):
                setattr(args, name, _from(root, here, value, name in PATHS))
    with contextlib.chdir(root):
        yield


def _from(root: Path, here: Path, typed: str, path: bool) -> str:
    """A path typed in `here`, as seen from `root` (absolute when outside it); a value
    that may be a name, as typed where it names no file there."""
    full = Path(os.path.normpath(here / typed))
    if not path and not full.exists() and not typed.endswith(CONFIG_ENDINGS):
        return typed
    return str(full.relative_to(root) if full.is_relative_to(root) else full)


def configfile_option(parser: argparse.ArgumentParser) -> None:
    """--configfile and --config, as the run takes them (Snakemake's options)."""
    parser.add_argument(
        "--configfile",
        nargs="+",
        default=[],
        help="overlays merged over config.yaml, as Snakemake's --configfile",
    )
    parser.add_argument(
        "--config",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="values merged over the files, as Snakemake's --config (e.g. 'budget={usd: 5}')",
    )


def given_values(args: argparse.Namespace) -> dict[str, object]:
    """`--config KEY=VALUE ...` read as Snakemake reads them; one it refuses is named."""
    from kora.config.files import merge
    from kora.run.workflow.snakemake_api import parse_config

    out: dict[str, object] = {}
    for entry in getattr(args, "config", []):
        try:
            out = merge(out, parse_config(entry))
        except ValueError as exc:
            key, _, value = entry.partition("=")
            if "." not in key:
                raise ConfigError(f"--config {entry}: Snakemake refuses it ({exc})") from None
            outer, *keys = key.split(".")
            inner = value
            for k in reversed(keys):
                inner = f"{{{k}: {inner}}}"
            raise ConfigError(
                f"--config {entry}: a key of the config's top level before `=`, as Snakemake "
                f"takes it; for a key under it give the mapping: --config '{outer}={inner}'"
            ) from None
    return out


def force_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a file in the way that kora did not write (or that was changed since); "
        "without it such a file is named and kept",
    )


def raw_config(args: argparse.Namespace) -> dict[str, Any]:
    """config.yaml with the --configfile overlays, then --config, merged over it, not
    validated."""
    from kora.config.files import config_paths, merge, merged, read_config_file, refuse_run_outputs

    refuse_run_outputs(getattr(args, "configfile", []), Path("."))  # a target after it
    paths = config_paths(getattr(args, "configfile", []), Path("."))
    # config.yaml may be missing (a command that runs anywhere), an overlay given not
    files = [read_config_file(p) if i or p.exists() else {} for i, p in enumerate(paths)]
    return merge(merged(files), given_values(args))


def benchmark_of_args(args: argparse.Namespace) -> Benchmark:
    """--benchmark, or the config's `benchmark` (v1 unless it says)."""
    from kora import benchmarks

    name = getattr(args, "benchmark", None) or raw_config(args).get("benchmark")
    return benchmarks.get(str(name or benchmarks.DEFAULT))


def layout_of_args(args: argparse.Namespace) -> Layout:
    """Where the config's version keeps its data and results."""
    return Layout.of(benchmark_of_args(args))


def taxonomy_dir(args: argparse.Namespace) -> str:
    """--taxonomy, or the config's `taxonomy_dir`, else its benchmark version's folder."""
    if getattr(args, "taxonomy", None):
        return str(args.taxonomy)
    given = raw_config(args).get("taxonomy_dir")
    return str(given) if isinstance(given, str) else benchmark_of_args(args).taxonomy_dir


def taxonomy_of_args(args: argparse.Namespace) -> Taxonomy:
    bm = benchmark_of_args(args)
    return bm.load_taxonomy(bm.taxonomy_paths(taxonomy_dir(args)))


def configfiles(args: argparse.Namespace) -> str:
    """The --configfile and --config options to repeat in a command printed for the user."""
    import shlex

    given = {
        option: getattr(args, option.strip("-"), []) for option in ("--configfile", "--config")
    }
    return "".join(f" {option} {shlex.join(values)}" for option, values in given.items() if values)


def run_command(args: argparse.Namespace, targets: list[str]) -> str:
    """The Snakemake command that makes `targets` with the config files this command was
    given (kora.config.files.snakemake_command): `--cores 2`, as the README's commands; run
    in the workspace, so typed in a folder below it, the command goes there first."""
    import shlex

    from kora.config.files import snakemake_command

    line = snakemake_command(targets, []) + configfiles(args)
    away = getattr(args, "away", None)
    return f"cd {shlex.quote(away)} && {line}" if away else line


def named_targets(args: argparse.Namespace, typed: list[str], results: bool = False) -> list[str]:
    """The targets typed on the command line, each one the config defines (or with
    `results`, one with a results folder), else refused with the name it nearly is.
    `--configfile` and `--config` take several values, as Snakemake's do, so `kora plan
    --configfile X TARGET` hands them the target too: a value that is no file and no YAML
    file name, or no KEY=VALUE, is taken back (a file of the run's results is refused)."""
    from kora.config.files import refuse_run_outputs

    refuse_run_outputs(args.configfile, Path("."))
    files = [v for v in args.configfile if Path(v).exists() or v.endswith(CONFIG_ENDINGS)]
    values = [v for v in args.config if "=" in v]
    more = [v for v in [*args.configfile, *args.config] if v not in files + values]
    args.configfile, args.config, typed = files, values, [*typed, *more]
    from kora.config.checks import unknown_target

    given = raw_config(args).get("targets")
    defined = [n for n, t in given.items() if t is not None] if isinstance(given, dict) else []
    if results and (folder := Path(layout_of_args(args).results)).is_dir():
        defined += [p.name for p in folder.iterdir() if p.is_dir() and p.name not in defined]
    for name in typed:
        if name not in defined:
            raise ConfigError(unknown_target(name, defined))
    return typed


def next_steps(
    args: argparse.Namespace, layout: Layout, targets: list[str], flag: str, entry: str, then: str
) -> None:
    """What to do after filing recordings for `targets`: the config entry a target still
    lacks (`flag`: imported or continued), then the command that runs them."""
    config = raw_config(args).get("targets") or {}
    missing = [n for n in targets if not (config.get(n) or {}).get(flag)]
    if missing:
        entries = ", ".join(f"{n}: {entry}" for n in missing)
        print(f"add under `targets:` in your config: {entries}", file=sys.stderr)
    runs = [layout.results_json(n) for n in targets]
    print(f"{then}: {run_command(args, runs)}", file=sys.stderr)
