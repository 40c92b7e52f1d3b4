"""The `kora` command: what is not a Snakemake file target."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kora.errors import KoraError


def taxonomy_of_args(args: argparse.Namespace) -> Any:
    from kora.benchmarks.taxonomy import load_taxonomy

    return load_taxonomy(taxonomy_dir(args))


def taxonomy_dir(args: argparse.Namespace) -> str:
    """--taxonomy, or the taxonomy of the project's config (config.yaml and any
    --configfile overlays): the folder of its `benchmark` version unless it names one."""
    if args.taxonomy:
        return str(args.taxonomy)
    from kora.config.schema import taxonomy_dir_of

    return taxonomy_dir_of(_raw_config(args))


def _raw_config(args: argparse.Namespace) -> dict[str, Any]:
    """config.yaml with the --configfile overlays merged over it, not validated."""
    from kora.config.files import config_paths, merge, read_config_file

    raw: dict[str, Any] = {}
    for path in config_paths(getattr(args, "configfile", []), Path(".")):
        if path.exists():
            raw = merge(raw, read_config_file(path))
    return raw


def cmd_aggregate(args: argparse.Namespace) -> int:
    from kora.benchmarks.v1.aggregate import aggregate_path
    from kora.io import write_json

    taxonomy = taxonomy_of_args(args) if Path(taxonomy_dir(args)).exists() else None
    scores, failed = aggregate_path(Path(args.path), taxonomy)
    out: dict[str, Any] = {"scores": scores}
    if failed:
        out["failed"] = failed
    write_json(args.output, out)
    tests = sum(s["sums"]["al"] for s in scores)
    print(f"{args.output}: {tests} tests in {len(scores)} groups", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from kora.run.ingest import import_scenarios, remove_imported_scenarios

    if args.remove:
        if args.file:
            raise KoraError("import-scenarios: give a FILE or --remove, not both")
        n = remove_imported_scenarios(Path("."))
        print(
            f"removed {n} imported scenarios from data/scenarios/; the next run generates "
            "scenarios from the seeds again (calls made before come from the store)",
            file=sys.stderr,
        )
        return 0
    if not args.file:
        raise KoraError("import-scenarios: give the FILE to import (or --remove)")
    counts = import_scenarios(
        Path(args.file), taxonomy_of_args(args), Path("."), replace=args.replace
    )
    print(
        f"imported {counts['scenarios']} scenarios into {counts['shards']} shards under "
        "data/scenarios/; the workflow now tests targets on them without generating any",
        file=sys.stderr,
    )
    return 0


def cmd_import_conversations(args: argparse.Namespace) -> int:
    from kora.run.ingest import import_conversations

    counts = import_conversations(
        Path(args.file), taxonomy_of_args(args), Path("."), target=args.target
    )
    for name, n in counts.items():
        print(f"imported {n} conversations into results/{name}/conversations/", file=sys.stderr)
    names = ", ".join(f"{n}: {{imported: true, prompts: [default, child]}}" for n in counts)
    print(
        f"to judge them, add under `targets:` in your config: {names}\n"
        f"then: snakemake --cores 10 " + " ".join(f"results/{n}/results.json" for n in counts),
        file=sys.stderr,
    )
    return 0


def cmd_continue(args: argparse.Namespace) -> int:
    from kora.run.continuation import stage_recordings

    def names(value: str | None) -> list[str] | None:
        return None if value is None else [v.strip() for v in value.split(",") if v.strip()]

    counts = stage_recordings(
        Path(args.file),
        taxonomy_of_args(args),
        Path("."),
        target=args.target,
        risk_ids=names(args.risk_ids),
        target_models=names(args.target_models),
        limit_per_risk=args.limit_per_risk,
    )
    for name, n in counts.items():
        print(f"filed {n} recorded conversations under results/{name}/recorded/", file=sys.stderr)
    targets = _raw_config(args).get("targets") or {}
    missing = [n for n in counts if not (targets.get(n) or {}).get("continued")]
    if missing:
        entries = ", ".join(f"{n}: {{model: MODEL, continued: true}}" for n in missing)
        print(
            "to carry them on, the config needs under `targets:` "
            f"{entries} (MODEL: the model they were recorded with)",
            file=sys.stderr,
        )
    print(
        "to carry them on to each risk's length and judge them: snakemake --cores 10 "
        + " ".join(f"results/{n}/results.json" for n in counts)
        + "".join(f" --configfile {f}" for f in getattr(args, "configfile", [])),
        file=sys.stderr,
    )
    return 0


def cmd_prompts(args: argparse.Namespace) -> int:
    from kora.commands.prompts import cmd_prompts as show

    return show(args, taxonomy_of_args(args))


def cmd_check(args: argparse.Namespace) -> int:
    from kora.config.files import load_run_config
    from kora.llm.lifecycle import lifecycle_notes

    cfg, _ = load_run_config(args.configfile)
    for note in lifecycle_notes(cfg.models, cfg.models):
        print(f"kora: warning: {note}", file=sys.stderr)
    files = " + ".join(["config.yaml", *args.configfile])
    print(
        f"{files}: config OK: {len(cfg.models)} models, targets {', '.join(cfg.targets)}, "
        f"judges {', '.join(cfg.judges)}",
        file=sys.stderr,
    )
    return 0


def cmd_ping(args: argparse.Namespace) -> int:
    from kora.commands.ping import cmd_ping as ping

    return ping(args)


def cmd_plan(args: argparse.Namespace) -> int:
    from kora.run.plan import print_plan

    return print_plan(args)


def _configfile_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--configfile",
        nargs="+",
        default=[],
        help="overlays merged over config.yaml, as Snakemake's --configfile",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kora", description="KORA child-safety benchmark")
    p.add_argument(
        "--taxonomy",
        help="taxonomy folder (default: the config's, data/taxonomy for KORA v1 and "
        "data/taxonomy/v2 for `benchmark: v2`)",
    )
    sub = p.add_subparsers(dest="command", required=True)

    a = sub.add_parser(
        "aggregate",
        help="per-test results (folder, .zip or JSONL; this project's, the reference's or "
        "KORA v2's, whose mechanism sums it keeps) -> results.json scores",
    )
    a.add_argument("path")
    a.add_argument("-o", "--output", required=True)
    _configfile_option(a)
    a.set_defaults(func=cmd_aggregate)

    i = sub.add_parser(
        "import-scenarios", help="pre-built scenarios (reference JSONL shape) into data/scenarios"
    )
    i.add_argument("file", nargs="?", help="JSONL of scenarios, one per line")
    i.add_argument(
        "--replace", action="store_true", help="replace generated scenarios already in data/"
    )
    i.add_argument(
        "--remove",
        action="store_true",
        help="remove imported scenarios: the workflow generates them from seeds again",
    )
    _configfile_option(i)
    i.set_defaults(func=cmd_import)

    ic = sub.add_parser(
        "import-conversations",
        help="recorded conversations to re-judge: JSONL of scenario, prompt, messages, "
        "modelId, or per-test result files (a folder, .zip or .json, as the reference run "
        "wrote them; their grades are left behind)",
    )
    ic.add_argument("file", help="a JSONL file, or a folder / .zip / .json of per-test results")
    ic.add_argument("--target", help="target name for every record (default: each modelId)")
    _configfile_option(ic)
    ic.set_defaults(func=cmd_import_conversations)

    co = sub.add_parser(
        "continue",
        help="recorded conversations to carry on to each risk's length with the target they "
        "were recorded with, then judge (only the missing turns are asked)",
    )
    co.add_argument("file", help="JSONL of scenario, prompt, messages, modelId (whole turns)")
    co.add_argument("--target", help="target name for every record (default: each modelId)")
    co.add_argument("--risk-ids", help="comma-separated risk ids to take (default: all)")
    co.add_argument("--target-models", help="comma-separated modelIds to take (default: all)")
    co.add_argument(
        "--limit-per-risk", type=int, help="the first N records of each risk, by test key"
    )
    _configfile_option(co)
    co.set_defaults(func=cmd_continue)

    pr = sub.add_parser("prompts", help="every prompt as rendered for one scenario (JSON)")
    pr.add_argument("scenario", help="a scenario JSON object (e.g. docs/example-scenario.json)")
    pr.add_argument("-o", "--output", help="write Markdown here instead of stdout")
    pr.set_defaults(func=cmd_prompts)

    c = sub.add_parser(
        "check-config", help="validate config.yaml with any --configfile overlays merged over it"
    )
    _configfile_option(c)
    c.set_defaults(func=cmd_check)

    pl = sub.add_parser(
        "plan", help="calls each requested target needs, how many are stored, estimated cost"
    )
    pl.add_argument("targets", nargs="*", help="target names (default: every target)")
    _configfile_option(pl)
    pl.set_defaults(func=cmd_plan)

    pg = sub.add_parser(
        "ping",
        help="send one harmless message to a target (and its child and judge models): "
        "does the config reach them?",
    )
    pg.add_argument("target", nargs="?", help="the target's name in the config")
    _configfile_option(pg)
    pg.add_argument("--target-only", action="store_true", help="skip the child and judge models")
    pg.set_defaults(func=cmd_ping)

    from kora.commands.annotate import add_arguments as annotate_arguments

    annotate_arguments(sub)

    from kora.commands import stats as stats

    cp = sub.add_parser("compare", help="agreement and 3x3 flip matrix of two judgment sets")
    stats.add_compare_arguments(cp)
    cp.set_defaults(func=stats.cmd_compare)
    ct = sub.add_parser(
        "compare-targets", help="paired comparison of two targets on the same scenarios"
    )
    stats.add_compare_targets_arguments(ct)
    ct.set_defaults(func=stats.cmd_compare_targets)
    st = sub.add_parser("stats", help="grade distribution per criterion; flags NO SIGNAL")
    stats.add_stats_arguments(st)
    st.set_defaults(func=stats.cmd_stats)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except KoraError as exc:
        print(f"kora: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file named on the command line that cannot be read
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"kora: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # output piped into `head` and closed early: not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
