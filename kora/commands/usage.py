"""`kora usage`: the workspace's bill, every run's, as the providers served and charged it.

It reads the bill (kora.llm.money.bill) beside the config's call store: each answer a provider
served, written down as it arrived. Calls no result rests on (made ahead of a job that
did not run, cut short by a stop) are in it: they were paid.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from kora.benchmarks.layout import CACHE_DIR
from kora.commands.common import configfile_option, raw_config

# what `--json`'s `billed` object and every row hold, in this order
# (reasoning_tokens: a part of output_tokens)
FIELDS = ("calls", "input_tokens", "output_tokens", "reasoning_tokens", "cache_write_tokens",
          "cache_read_tokens")  # fmt: skip


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser(
        "usage",
        help="the workspace's bill: calls, tokens and cost every run paid, by model, kind "
        "of call and day",
        description="What the providers served and charged in this folder's runs, from "
        "the bill kora writes as each answer arrives (beside the call store): calls made "
        "ahead of jobs that did not run and attempts cut short by a stop included.",
    )
    c.add_argument("--json", action="store_true", help="print JSON: `billed` and the rows")
    c.add_argument(
        "--since",
        type=_day,
        metavar="DATE",
        help="count from this day on (YYYY-MM-DD, local time)",
    )
    c.add_argument(
        "--runs",
        action="store_true",
        help="also each run: its start and end, targets, command, how it ended and its bill",
    )
    configfile_option(c)
    c.set_defaults(func=run)


def _day(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def bill_folder(args: argparse.Namespace) -> Path:
    from kora.llm.money.bill import bill_dir

    return bill_dir(Path(str(raw_config(args).get("cache_dir") or CACHE_DIR)))


def run(args: argparse.Namespace) -> int:
    from kora.llm.money.bill import charges

    since = None
    if args.since is not None:
        since = dt.datetime.combine(args.since, dt.time()).timestamp()
    folder = bill_folder(args).resolve()  # the workspace's, wherever the command was typed
    report = summarise(charges(folder, since=since), folder, since)
    if args.json:
        doc = {"bill": str(folder), "since": args.since and args.since.isoformat(), **report}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    when = f" since {args.since.isoformat()}" if args.since else ""
    billed = report["billed"]
    print(f"The bill of this workspace ({folder}){when}:")
    print(f"  billed: {_words(billed)}")
    for title, key in [("model", "byModel"), ("kind of call", "byStage"), ("day", "byDay")]:
        if billed["calls"]:
            print()
            _table(title, report[key])
    if args.runs and report["byRun"]:
        print("\n  runs, oldest first:")
        for r in report["byRun"]:
            print(f"  {COMMANDS.get(r['name'], r['name'])}  {_how_it_went(r)}")
            if r["started"]:
                print(f"    targets: {', '.join(r['targets'] or []) or 'none'}")
                print(f"    command: {r['command']}")
            print(f"    billed: {_words(r)}")
    return 0


def summarise(items: Iterable[Any], folder: Path, since: float | None = None) -> dict[str, Any]:
    """The bill's lines summed: in all, and by model, kind of call, day and run; each run
    with its record (kora.llm.money.bill.run_record), oldest first, those that paid for no call
    (started `since`) too."""
    from kora.llm.money.bill import run_record
    from kora.llm.money.usage import Counts

    total = Counts()
    groups: dict[str, dict[str, Counts]] = {g: defaultdict(Counts) for g in GROUPS}
    calls: dict[str, list[float]] = defaultdict(list)
    for c in items:
        total += c.counts
        calls[c.run].append(c.t)
        for g, of in GROUPS.items():
            groups[g][of(c)] += c.counts
    out: dict[str, Any] = {"billed": _row(total)}
    for g, rows in groups.items():
        out[g] = [{"name": name, **_row(rows[name])} for name in sorted(rows)]
    # a run recorded that paid nothing (every answer from the call store) is a run too
    recorded = {p.parent.name for p in folder.glob("*/run.json")} - set(calls)
    out["byRun"] += [
        {"name": name, **_row(Counts())}
        for name in sorted(recorded)
        if run_record(folder, name).get("started", 0) >= (since or 0)
    ]
    for r in out["byRun"]:
        record, t = run_record(folder, r["name"]), calls[r["name"]]
        r["first_call"], r["last_call"] = (_when(min(t)), _when(max(t))) if t else (None, None)
        r["started"], r["ended"] = _when(record.get("started")), _when(record.get("ended"))
        r.update({k: record.get(k) for k in ("targets", "command", "outcome")})
    out["byRun"].sort(key=lambda r: r["started"] or r["first_call"] or "")
    return out


def _when(t: float | None) -> str | None:
    """A time of the bill as it is printed: local, to the second."""
    return None if t is None else dt.datetime.fromtimestamp(t).isoformat(" ", "seconds")


# how a run ended (the record's `outcome`, kora.run.session), in words
OUTCOMES = {
    "finished": "finished",
    "failures": "finished with failures",
    "SIGINT": "stopped by Ctrl-C (SIGINT)",
    "SIGTERM": "stopped by SIGTERM",
    "budget": "stopped at the budget",
    "config": "failed on a configuration error",
    "service": "failed: a service could not be reached",
    "failed": "failed: a job failed",
}


# the calls of a command, not of a run (others outside a run: kora.llm.money.bill.OUTSIDE)
COMMANDS = {"ping": "kora ping"}


def _how_it_went(r: dict[str, Any]) -> str:
    if r["name"] in COMMANDS:
        return f"calls from {r['first_call']} to {r['last_call']}"
    if not r["started"]:
        return (
            f"calls from {r['first_call']} to {r['last_call']}; no record of a run (calls "
            "outside one, such as kora ping's)"
        )
    if not r["outcome"]:
        return f"{r['started']}, no end recorded: killed (kill -9, a lost machine) or running"
    return f"{r['started']} to {r['ended']}, {OUTCOMES.get(r['outcome'], r['outcome'])}"


GROUPS: dict[str, Callable[[Any], str]] = {
    "byModel": lambda c: c.model if not c.api_model else f"{c.model} ({c.api_model})",
    "byStage": lambda c: c.stage,
    "byDay": lambda c: dt.datetime.fromtimestamp(c.t).date().isoformat(),
    "byRun": lambda c: c.run,
}


def _row(c: Any) -> dict[str, Any]:
    return {**{f: getattr(c, f) for f in FIELDS}, "cost": round(c.cost, 6)}


def _words(r: dict[str, Any]) -> str:
    from kora.llm.money.usage import Counts

    return f"{r['calls']:,} calls, " + Counts(**{k: r[k] for k in (*FIELDS, "cost")}).said()


def _table(title: str, rows: list[dict[str, Any]]) -> None:
    head = [f.removesuffix("_tokens").replace("_", " ") for f in FIELDS] + ["cost"]
    width = max([len(title), *(len(r["name"]) for r in rows)])
    print(f"  {title:<{width}}  " + "  ".join(f"{h:>13}" for h in head))
    for r in rows:
        cells = [f"{r[f]:,}" for f in FIELDS] + [f"${r['cost']:.4f}"]
        print(f"  {r['name']:<{width}}  " + "  ".join(f"{c:>13}" for c in cells))
