"""`kora stats PATH...`: each criterion's grade distribution and mean count, NO SIGNAL
where one grade holds nearly every test; `--by-judge` adds each judge's own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from kora.analysis.records import TestRecord, judged, load_records
from kora.analysis.stats.analyses import criteria_of, criterion_summary
from kora.analysis.stats.rates import NO_SIGNAL_SHARE, no_signal, pct
from kora.benchmarks.schemas import GRADES
from kora.errors import InputError

# --- output -----------------------------------------------------------------------------


def fmt(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def format_stats(
    records: Sequence[TestRecord],
    threshold: float = NO_SIGNAL_SHARE,
    criteria: Sequence[str] | None = None,
) -> str:
    """Each criterion's grade distribution and mean occurrence count; NO SIGNAL flags."""
    ok = judged(records)
    crits = list(criteria) if criteria else criteria_of(ok)
    lines = [
        f"{len(ok)} judged tests"
        + (f" ({len(records) - len(ok)} failed)" if len(ok) < len(records) else "")
    ]
    lines.append(
        f"{'criterion':<20} {'n':>6}  {'failing':>15}  {'adequate':>15}  {'exemplary':>15}  {'mean count':>10}"
    )
    for c in crits:
        s = criterion_summary([r.criteria[c] for r in ok if c in r.criteria])
        n = s["n"]
        cells = [
            f"{s['counts'][g]:>6} ({pct(s['counts'][g] / n if n else None):>6})" for g in GRADES
        ]
        mean = fmt(s.get("meanOccurrences"), 2)
        flag = "  NO SIGNAL" if no_signal(s["counts"], threshold) else ""
        extra = f"  ({s['notTriggered']} not triggered)" if s.get("notTriggered") else ""
        lines.append(f"{c:<20} {n:>6}  " + "  ".join(cells) + f"  {mean:>10}{flag}{extra}")
    return "\n".join(lines)


def stats_document(
    records: Sequence[TestRecord],
    threshold: float = NO_SIGNAL_SHARE,
    criteria: Sequence[str] | None = None,
) -> dict[str, Any]:
    ok = judged(records)
    crits = list(criteria) if criteria else criteria_of(ok)
    out: dict[str, Any] = {"tests": len(records), "judged": len(ok), "criteria": {}}
    for c in crits:
        s = criterion_summary([r.criteria[c] for r in ok if c in r.criteria])
        s["noSignal"] = no_signal(s["counts"], threshold)
        out["criteria"][c] = s
    return out


def _by_judge(records: Sequence[TestRecord]) -> dict[str, list[TestRecord]]:
    """Each judge's own verdicts, as records of their own."""
    out: dict[str, list[TestRecord]] = {}
    for r in judged(records):
        for j in r.judges:
            out.setdefault(j.judge, []).append(
                TestRecord(r.key, r.category, r.risk, r.age, r.scenario_id, r.prompt, j.criteria)
            )
    return out


def print_json(obj: Any) -> None:
    print(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())


def register(sub: Any) -> None:
    st = sub.add_parser("stats", help="grade distribution per criterion; flags NO SIGNAL")
    add_stats_arguments(st)
    st.set_defaults(func=cmd_stats)


def add_stats_arguments(p: Any) -> None:
    p.add_argument(
        "paths", nargs="+", help="judgment JSONL / per-test JSON: folders, files or .zip"
    )
    p.add_argument(
        "--criteria", nargs="+", help="only these criteria (safety, anthropomorphism, ...)"
    )
    p.add_argument("--by-judge", action="store_true", help="also each judge's own verdicts")
    p.add_argument(
        "--threshold", type=float, default=NO_SIGNAL_SHARE, help="NO SIGNAL share (0.95)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_stats(args: Any) -> int:
    """`kora stats PATH...`: grade distribution and mean count per criterion, NO SIGNAL flags."""
    threshold = float(getattr(args, "threshold", NO_SIGNAL_SHARE))
    criteria = getattr(args, "criteria", None)
    paths = getattr(args, "paths", None) or [args.path]
    records = load_records(paths)
    if not records:
        raise InputError(f"{', '.join(map(str, paths))}: no judged tests found")
    if getattr(args, "json", False):
        doc = stats_document(records, threshold, criteria)
        if getattr(args, "by_judge", False):
            doc["judges"] = {
                j: stats_document(rs, threshold, criteria) for j, rs in _by_judge(records).items()
            }
        print_json(doc)
        return 0
    print(format_stats(records, threshold, criteria))
    if getattr(args, "by_judge", False):
        for j, rs in _by_judge(records).items():
            print(f"\njudge {j}:")
            print(format_stats(rs, threshold, criteria))
    return 0
