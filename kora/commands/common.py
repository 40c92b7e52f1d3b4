"""What the `kora` subcommands share: the project's config as the command line gives it
(config.yaml with any --configfile merged over it), its benchmark version, taxonomy and
folders."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kora.benchmarks.base import Benchmark
    from kora.benchmarks.taxonomy import Taxonomy
    from kora.run.layout import Layout


def configfile_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--configfile",
        nargs="+",
        default=[],
        help="overlays merged over config.yaml, as Snakemake's --configfile",
    )


def force_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a file in the way that kora did not write (or that was changed since); "
        "without it such a file is named and kept (kora.io.refuse_to_replace)",
    )


def raw_config(args: argparse.Namespace) -> dict[str, Any]:
    """config.yaml with the --configfile overlays merged over it, not validated."""
    from kora.config.files import config_paths, merged, read_config_file

    paths = config_paths(getattr(args, "configfile", []), Path("."))
    return merged([read_config_file(p) if p.exists() else {} for p in paths])


def benchmark_of_args(args: argparse.Namespace) -> Benchmark:
    """--benchmark, or the config's `benchmark` (v1 unless it says)."""
    from kora import benchmarks

    name = getattr(args, "benchmark", None) or raw_config(args).get("benchmark")
    return benchmarks.get(str(name or benchmarks.DEFAULT))


def layout_of_args(args: argparse.Namespace) -> Layout:
    """Where the config's version keeps its data and results."""
    from kora.run.layout import Layout

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
    """The --configfile options to repeat in a command printed for the user."""
    import shlex

    files = getattr(args, "configfile", [])
    return f" --configfile {shlex.join(files)}" if files else ""


def run_command(args: argparse.Namespace, targets: list[str]) -> str:
    """The Snakemake command that makes `targets` with the config files this command was
    given (kora.config.files.snakemake_command): `--cores 2`, as the README's commands."""
    from kora.config.files import snakemake_command

    return snakemake_command(targets, getattr(args, "configfile", []))


def split_overlays(configfiles: list[str], targets: list[str]) -> tuple[list[str], list[str]]:
    """`--configfile` takes several files, as Snakemake's does, so `kora plan --configfile
    X TARGET` hands it the target too: a value that is no file and no YAML file name is
    taken back as a target."""
    files, more = [], []
    for value in configfiles:
        if Path(value).exists() or value.endswith((".yaml", ".yml", ".json")):
            files.append(value)
        else:
            more.append(value)
    return files, [*targets, *more]


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
