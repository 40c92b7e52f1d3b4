"""`kora bundle TARGET -o FILE`: everything a result rests on, in one file that anyone can
replay without a key or a network (`kora replay FILE`; kora.analysis.bundle says what it
holds)."""

from __future__ import annotations

import argparse
import shlex
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
    b = sub.add_parser(
        "bundle",
        help="one file with everything a result rests on, to replay offline (kora replay)",
        description="Write one zip file holding what TARGET's result was made from: its "
        "manifest and config (credentials masked), templates, taxonomy, every data shard "
        "and every stored answer the result rests on. `kora replay FILE` rebuilds the "
        "result from it on any machine, with no key and no network.",
    )
    b.add_argument("target", help="the target whose result to bundle")
    b.add_argument("-o", "--output", required=True, help="the bundle file to write (.zip)")
    force_option(b)
    configfile_option(b)
    b.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kora.analysis.bundle import make_bundle
    from kora.errors import InputError
    from kora.io import refuse_to_replace, remember_written

    if Path(args.output).is_dir():  # said before the bundle is made
        raise InputError(f"{args.output}: a folder, where a file is named")
    refuse_to_replace([Path(args.output)], args.force)
    target = named_targets(args, [args.target], results=True)[0]
    layout = layout_of_args(args)
    folder = layout.target_dir(target)
    results, summary = Path(layout.results_json(target)), Path(layout.summary_json(target))
    report = Path(layout.report_html(target))
    # the report's figures are bundled when they are this result's
    with_report = (
        results.exists()
        and report.exists()
        and summary.exists()
        and summary.stat().st_mtime_ns >= results.stat().st_mtime_ns
    )
    extra = [
        str(layout.import_manifest),
        str(Path(layout.recorded(target, "x")).parent),
        layout.annotations(target),
        layout.agreement_json(target),
    ]
    done = make_bundle(
        Path(args.output), workdir=Path.cwd(), target_dir=folder, extra=extra, report=with_report
    )
    remember_written([done.path])
    print(
        f"{done.path}: {done.bytes / 1e6:,.1f} MB, {done.files:,} files and {done.answers:,} "
        f"stored answers; replay it anywhere with `kora replay {shlex.quote(str(done.path))}`",
        file=sys.stderr,
    )
    if not with_report:
        print(
            f"the report is not bundled ({report} is missing or older than {results}): a "
            "replay checks the scores and the shards; to bundle it too, make it first, "
            f"`{run_command(args, [str(report)])}`, then bundle again",
            file=sys.stderr,
        )
    return 0
