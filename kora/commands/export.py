"""`kora export TARGET --hf DIR`: a result's table of tests (conversations.parquet) with a
dataset card, laid out as Hugging Face `datasets` loads a folder: `datasets.load_dataset(DIR)`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kora.commands.common import (
    configfile_option,
    force_option,
    layout_of_args,
    named_targets,
    run_command,
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    e = sub.add_parser(
        "export",
        help="a result's tests as a dataset: conversations.parquet with a dataset card",
        description="Write TARGET's conversations.parquet (one row per test) into DIR with "
        "a README.md dataset card (what the benchmark is, the manifest's facts, the "
        "columns, the licence) and the manifest, in the layout Hugging Face `datasets` "
        "loads: datasets.load_dataset('DIR').",
    )
    e.add_argument("target", help="the target whose result to export")
    e.add_argument("--hf", required=True, metavar="DIR", help="the folder to write")
    force_option(e)
    configfile_option(e)
    e.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import orjson

    from kora.analysis.card import DATA_FILE, dataset_card
    from kora.analysis.parquet import count_rows
    from kora.benchmarks.layout import MANIFEST
    from kora.errors import KoraError
    from kora.io import refuse_to_replace, remember_written, write_atomic

    target = named_targets(args, [args.target], results=True)[0]
    layout = layout_of_args(args)
    table = Path(layout.conversations_parquet(target))
    manifest = Path(layout.manifest_json(target))
    result = Path(layout.results_json(target))
    out = Path(args.hf)
    written = [out / DATA_FILE, out / MANIFEST, out / "README.md"]
    results = Path(layout.results).resolve()
    if runs := [str(p) for p in written if p.exists() and p.resolve().is_relative_to(results)]:
        raise KoraError(
            f"{', '.join(runs)}: a file of the run's results, so not replaced: "
            "name another folder for --hf"
        )
    refuse_to_replace(written, args.force)
    for path in (table, manifest, result):
        if not path.exists():
            raise KoraError(f"{path} not found: make it first, `{run_command(args, [str(path)])}`")
    rows = count_rows(table)
    (out / DATA_FILE).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out / DATA_FILE, table.read_bytes())
    write_atomic(out / MANIFEST, manifest.read_bytes())
    card = dataset_card(
        orjson.loads(manifest.read_bytes()), orjson.loads(result.read_bytes()), rows
    )
    write_atomic(out / "README.md", card.encode())
    remember_written(written)
    print(
        f"{out}: {rows:,} rows in {DATA_FILE}, with README.md (the dataset card) and "
        f"manifest.json; load it with datasets.load_dataset({str(out)!r})",
        file=sys.stderr,
    )
    return 0
