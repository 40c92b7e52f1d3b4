"""`kora compare A B`: two judgment sets joined by test key: agreement, Cohen's kappa and
the 3x3 flip matrix per criterion."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from kora.analysis.records import criterion_label, load_records
from kora.analysis.stats.agreement import kappa_label
from kora.analysis.stats.analyses import compare_judgments
from kora.analysis.stats.rates import pct
from kora.benchmarks.schemas import GRADES
from kora.commands.stats import fmt, print_json
from kora.errors import InputError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cp = sub.add_parser(
        "compare",
        help="agreement and 3x3 flip matrix of two judgment sets",
        description="Join two sets of judgments on their test keys and show, per "
        "criterion, how often they agree, Cohen's kappa and which grades turned into which.",
    )
    add_compare_arguments(cp)
    cp.set_defaults(func=cmd_compare)


def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="judgment set A: folder, .zip or JSON/JSONL file(s)")
    p.add_argument("b", help="judgment set B, joined to A by test key")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def format_matrix(m: Sequence[Sequence[int]]) -> str:
    w = max(9, *(len(str(x)) for row in m for x in row))
    head = "A \\ B".ljust(14) + "".join(f"{g:>{w + 1}}" for g in GRADES)
    rows = [
        f"{g:<14}" + "".join(f"{x:>{w + 1}}" for x in row) for g, row in zip(GRADES, m, strict=True)
    ]
    return "\n".join([head, *rows])


def format_compare(doc: Mapping[str, Any], a: str, b: str) -> str:
    lines = [
        f"A = {a}",
        f"B = {b}",
        f"matched {doc['matched']} tests by key; only in A {doc['onlyA']}, only in B {doc['onlyB']}",
    ]
    for c, s in doc["criteria"].items():
        agree = pct(s["agreement"])
        flips = s["n"] - sum(s["matrix"][i][i] for i in range(3))
        lines += [
            "",
            f"{criterion_label(c)} ({c}): n {s['n']}, agreement {agree}, {flips} flipped, "
            f"Cohen's kappa {fmt(s['cohenKappa'])} ({kappa_label(s['cohenKappa'])})",
            format_matrix(s["matrix"]),
        ]
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace) -> int:
    """`kora compare A B`: two judgment sets joined by test key, agreement and flip matrices."""
    a, b = load_records([args.a]), load_records([args.b])
    doc = compare_judgments(a, b)
    if not doc["matched"]:
        raise InputError(
            f"no test key is in both {args.a} ({len(a)} tests) and {args.b} ({len(b)} tests)"
        )
    if getattr(args, "json", False):
        print_json(doc)
    else:
        print(format_compare(doc, str(args.a), str(args.b)))
    return 0
