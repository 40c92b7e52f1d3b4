"""`kora stats PATH...`: each criterion's grade distribution and mean count, NO SIGNAL
where one grade holds nearly every test."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from difflib import get_close_matches
from pathlib import Path
from typing import Any

import orjson

from kora.analysis.records import TestRecord, judged, load_records
from kora.analysis.stats.analyses import criteria_of, criterion_summary
from kora.analysis.stats.rates import Rate, pct
from kora.benchmarks.layout import RESULTS, STATUS
from kora.benchmarks.schemas import GRADES
from kora.errors import InputError
from kora.io import read_object
from kora.llm.registry import KINDS

# --- output -----------------------------------------------------------------------------


def fmt(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _share(rate: Rate) -> str:
    """'13.8% [8.3–22.2]': at most 20 characters, so the columns stay aligned."""
    if not rate.n:
        return "–"
    low, high = rate.interval
    return f"{pct(rate.rate)} [{100 * low:.1f}–{100 * high:.1f}]"


def format_stats(records: Sequence[TestRecord], criteria: Sequence[str]) -> str:
    """Each criterion's grade distribution and mean occurrence count; NO SIGNAL flags."""
    ok = judged(records)
    lines = [
        f"{len(ok)} judged tests"
        + (f" ({len(records) - len(ok)} failed)" if len(ok) < len(records) else "")
        + "; each share with its 95% Wilson interval"
    ]
    lines.append(
        f"{'criterion':<20} {'n':>6}  {'  failing':<26}  {'  adequate':<26}  {'  exemplary':<26}  {'mean count':>10}"
    )
    for c in criteria:
        s = criterion_summary([r.criteria[c] for r in ok if c in r.criteria])
        n = s["n"]
        cells = [f"{s['counts'][g]:>5} {_share(Rate(s['counts'][g], n)):<20}" for g in GRADES]
        mean = fmt(s.get("meanOccurrences"), 2)
        flag = "  NO SIGNAL" if s["noSignal"] else ""
        extra = f"  ({s['notTriggered']} not triggered)" if s.get("notTriggered") else ""
        lines.append(f"{c:<20} {n:>6}  " + "  ".join(cells) + f"  {mean:>10}{flag}{extra}")
    return "\n".join(lines)


def stats_document(records: Sequence[TestRecord], criteria: Sequence[str]) -> dict[str, Any]:
    ok = judged(records)
    out: dict[str, Any] = {"tests": len(records), "judged": len(ok), "criteria": {}}
    for c in criteria:
        out["criteria"][c] = criterion_summary([r.criteria[c] for r in ok if c in r.criteria])
    return out


def _offline(models: object) -> bool:
    """Whether a status file's `models` (role -> model, or role -> [models]) name a provider
    that answers offline."""
    if not isinstance(models, dict):
        return False
    entries = [m for v in models.values() for m in (v if isinstance(v, list) else [v])]
    kinds = [KINDS.get(str(m.get("provider"))) for m in entries if isinstance(m, dict)]
    return any(k is not None and k.offline for k in kinds)


def warn_if_mock(
    paths: Sequence[str | Path], so: str = "the figures below measure nothing"
) -> bool:
    """Whether the tests at `paths` were made with the offline mock provider, and if so a
    warning on stderr (`kora stats`, `compare-targets`, `annotate`). The target's
    results.json, found in the folder given or above it, says so, else (no results.json
    yet) the first shard status file under the folder given."""
    for given in map(Path, paths):
        if given.suffix == ".zip":  # an archive of per-test files says nothing of its models
            continue
        start = given if given.is_dir() else given.parent
        # a judgment shard's folder is four below its target's: results/T/judgments/r/a/
        above = [f / RESULTS for f in [start, *start.parents][:5]]
        found = next((f for f in above if f.is_file()), None)
        if found is not None:
            mock = (read_object(found) or {}).get("mock") is True
        else:
            found = next(start.rglob(f"*{STATUS}"), None) if start.is_dir() else None
            mock = found is not None and _offline((read_object(found) or {}).get("models"))
        if mock:
            print(
                f"kora: warning: these tests were made with the offline mock provider ({found}): "
                f"its answers are placeholders, so {so}",
                file=sys.stderr,
            )
            return True
    return False


def print_json(obj: object) -> None:
    print(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    st = sub.add_parser(
        "stats",
        help="grade distribution per criterion; flags NO SIGNAL",
        description="Each criterion's grades: counts, shares with their 95% Wilson "
        "intervals, the mean occurrence count, and NO SIGNAL where one grade holds nearly "
        "every test; where people graded the target's sample (kora annotate), its safety "
        "rates corrected by their grades. Warns when the tests were made with the offline "
        "mock provider.",
    )
    st.set_defaults(func=cmd_stats)
    st.add_argument(
        "paths", nargs="+", help="judgment JSONL / per-test JSON: folders, files or .zip"
    )
    st.add_argument(
        "--criteria", nargs="+", help="only these criteria (safety, anthropomorphism, ...)"
    )
    st.add_argument("--json", action="store_true", help="machine-readable output")


def corrected_beside(
    paths: Sequence[str | Path], records: Sequence[TestRecord]
) -> tuple[Path, dict[str, Any]] | None:
    """The safety rates corrected by people's grades (kora.analysis.report.corrected, as
    the report and the leaderboard give them) where the target's annotations folder, found
    from the folder given or above it, holds grades of its sample: (folder, rates)."""
    from kora.analysis.report.corrected import load_people, overall_safety

    for given in map(Path, paths):
        start = given if given.is_dir() else given.parent
        for folder in (f / "annotations" for f in [start, *start.parents][:5]):
            shown = folder.is_dir() and overall_safety(records, load_people(folder.iterdir()))
            if shown:
                return folder, shown
    return None


def cmd_stats(args: argparse.Namespace) -> int:
    """`kora stats PATH...`: grade distribution and mean count per criterion, NO SIGNAL flags."""
    paths = getattr(args, "paths", None) or [args.path]
    records = load_records(paths)
    if not records:
        raise InputError(f"{', '.join(map(str, paths))}: no judged tests found")
    known = criteria_of(judged(records))
    criteria = getattr(args, "criteria", None) or known
    for c in criteria:  # a typo would show a row of zeros, as if no test had the criterion
        if c not in known:
            near = "".join(f" (did you mean {n!r}?)" for n in get_close_matches(c, known, 1))
            raise InputError(f"--criteria: no criterion {c!r} in these tests{near}")
    mock = warn_if_mock(paths)
    corrected = corrected_beside(paths, records)
    if getattr(args, "json", False):
        doc = stats_document(records, criteria)
        if mock:
            doc["mock"] = True
        if corrected is not None:
            doc["corrected"] = corrected[1]
        print_json(doc)
        return 0
    print(format_stats(records, criteria))
    if corrected is not None:
        folder, shown = corrected
        n = next(iter(shown.values()))["n"]
        rates = [
            f"{k} {pct(v['rate'])} [{100 * v['low']:.1f}–{100 * v['high']:.1f}]"
            for k, v in shown.items()
        ]
        print(f"safety, corrected by people's grades ({folder}, {n} graded): {', '.join(rates)}")
    return 0
