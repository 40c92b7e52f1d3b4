"""`kora prompts SCENARIO.json`: every prompt of the run's benchmark as rendered for one
scenario (kora.benchmarks.showcase)."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from kora.benchmarks.base import Benchmark
from kora.benchmarks.schemas import Scenario
from kora.benchmarks.showcase import as_markdown, rendered_prompts
from kora.benchmarks.taxonomy import Taxonomy
from kora.commands.common import (
    benchmark_of_args,
    configfile_option,
    force_option,
    taxonomy_of_args,
)
from kora.errors import InputError
from kora.io import refuse_to_replace, remember_written, write_atomic


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pr = sub.add_parser(
        "prompts",
        help="every prompt as rendered for one scenario (Markdown)",
        description="Print, as Markdown, every prompt the config's benchmark version "
        "would send for one scenario, rendered from the config's templates.",
    )
    pr.add_argument("scenario", help="a scenario JSON object (e.g. docs/example-scenario.json)")
    pr.add_argument("-o", "--output", help="write Markdown here instead of stdout")
    force_option(pr)
    configfile_option(pr)
    pr.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return show(args, benchmark_of_args(args), taxonomy_of_args(args))


def show(args: argparse.Namespace, benchmark: Benchmark, taxonomy: Taxonomy) -> int:
    output = Path(args.output) if args.output else None
    if output is not None:
        refuse_to_replace([output], args.force)
    path = Path(args.scenario)
    try:
        scenario = Scenario.model_validate(orjson.loads(path.read_bytes()))
    except (OSError, orjson.JSONDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not a scenario: {exc}") from None
    text = as_markdown(rendered_prompts(benchmark, scenario, taxonomy), benchmark.rendered_intro)
    if output is not None:
        write_atomic(output, text.encode())
        remember_written([output])
    else:
        print(text)
    return 0
