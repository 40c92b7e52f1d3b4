"""The `kora` command: what is not a Snakemake file target, one module per subcommand."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from pathlib import Path

from kora.benchmarks import VERSIONS
from kora.commands.common import in_workspace
from kora.errors import KoraError

# each module registers its subcommand and runs it (imported when the parser is built:
# every module imports its heavy parts inside `run`)
SUBCOMMANDS = (
    "aggregate",
    "import_scenarios",
    "import_conversations",
    "continue_recordings",
    "prompts",
    "check_config",
    "plan",
    "ping",
    "annotate",
    "agreement",
    "compare",
    "compare_targets",
    "stats",
    "usage",
    "bundle",
    "replay",
    "export",
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kora", description="KORA child-safety benchmark")
    p.add_argument(
        "--taxonomy",
        help="taxonomy folder (default: the config's `taxonomy_dir`, else its benchmark "
        "version's: data/taxonomy for v1, data/taxonomy/v2 for v2)",
    )
    p.add_argument(
        "--benchmark",
        choices=list(VERSIONS),
        help="the KORA version (default: the config's `benchmark`, else v1)",
    )
    sub = p.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"kora.commands.{name}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with in_workspace(args):
            from kora.config.files import check_checkout

            check_checkout(Path.cwd())  # the workspace's, wherever the command was typed
            code: int = args.func(args)
        return code
    except KoraError as exc:
        from kora.llm.masking import terminal_safe  # the text may quote a server's

        print(terminal_safe(f"kora: error: {exc}"), file=sys.stderr)
        return 2
    except BrokenPipeError:
        # output piped into `head` and closed early: not an error of ours (before OSError,
        # which it is one of)
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - Python flushes it at exit
        return 0
    except OSError as exc:  # a file named on the command line that cannot be read
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"kora: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
