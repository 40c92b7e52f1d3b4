"""report.html and leaderboard.html: Jinja2 templates (templates/) with autoescaping.

Nothing a model, a judge or a config writes can change a page's structure: every value
reaches the page through an autoescaped template expression; the conversation browser's
and the leaderboard's conversations are packed (xz-compressed JSON in base64,
kora.analysis.pagekit.pack) in `<script>` data blocks, whose alphabet has no character that
could end the element. The pages' own scripts insert model text with `textContent` only.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from textwrap import shorten
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from kora import benchmarks
from kora.analysis.pagekit import CRITERION_HELP, pack
from kora.analysis.records import TestRecord, criterion_label
from kora.analysis.report.browser import browser_data
from kora.analysis.report.corrected import People, add_corrected, judge_off_count
from kora.analysis.report.leaderboard import ranks, spend, target_model
from kora.analysis.report.names import Names, age_key
from kora.analysis.report.pairs import grid, overall_verdict, side_by_side
from kora.analysis.report.replies import FLAGS
from kora.analysis.report.summary import build_summary, records_of
from kora.analysis.stats.agreement import kappa_label
from kora.analysis.stats.paired import verdict
from kora.analysis.stats.rates import Rate, pct
from kora.benchmarks.outcomes import BEHAVIOR_CRITERIA, Judgment
from kora.benchmarks.schemas import GRADES
from kora.benchmarks.taxonomy import Taxonomy
from kora.io import write_atomic, write_json

SHORT_LABELS = {
    "anthropomorphism": "Anthropo\u00admorphism",
    "epistemicHumility": "Epistemic humility",
    "humanRedirection": "Human redirection",
}
HEAT_MAX = 0.5  # failing rates at or above this get the full colour
NAV = (
    ("overview", "Overview"),
    ("distribution", "Safety by risk"),
    ("heatmap", "Risk × age"),
    ("prompts", "default vs child"),
    ("behaviour", "Behaviour criteria"),
    ("judges", "Judges"),
    ("conversations", "Conversations"),
)


def pvalue(p: float) -> str:
    return "<0.0001" if p < 1e-4 else f"{p:.3g}"


def rate_of(d: Mapping[str, Any]) -> Rate:
    return Rate(int(d["k"]), int(d["n"]))


def bar_parts(s: Mapping[str, Any]) -> dict[str, Any] | None:
    """A stacked grade bar in a 100 x 10 box: segments and the two rates' interval lines."""
    n = s["n"]
    if not n:
        return None
    counts = s["counts"]
    segments = []
    x = 0.0
    for g in GRADES:
        w = 100 * counts[g] / n
        if w > 0:
            segments.append((g, x, w))
        x += w
    fl, fh = s["failing"]["low"], s["failing"]["high"]
    el, eh = s["exemplary"]["low"], s["exemplary"]["high"]
    # failing grows from the left, exemplary from the right: its interval is mirrored
    lines = [(100 * a, 100 * b, y) for a, b, y in ((fl, fh, 3.2), (1 - eh, 1 - el, 6.8))]
    tip = ", ".join(f"{g} {counts[g]} ({pct(counts[g] / n)})" for g in GRADES)
    return {"segments": segments, "lines": lines, "tip": tip}


def heat_colour(rate: float) -> tuple[str, str]:
    """(background, text colour) of a heat-map cell: white to orange at HEAT_MAX."""
    t = min(1.0, rate / HEAT_MAX)
    rgb = [round(255 + (c - 255) * t) for c in (0xD5, 0x5E, 0x00)]
    return f"rgb({rgb[0]},{rgb[1]},{rgb[2]})", ("#fff" if t > 0.6 else "#1d2330")


@functools.cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("kora.analysis.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(pct=pct, pvalue=pvalue)
    env.globals.update(
        rate=rate_of,
        bar_parts=bar_parts,
        heat_colour=heat_colour,
        label=lambda c: criterion_label(c),
        kappa_label=kappa_label,
        verdict=verdict,
    )
    return env


def _reply_rows(replies: Mapping[str, Any] | None) -> list[tuple[str, str, int]]:
    """(key, what, count) for the target-replies table: the flags, then the normal ends."""
    if replies is None:
        return []
    reasons = replies["finishReasons"]
    rows = [("empty", FLAGS["empty"][1], replies["empty"])]
    rows += [(k, long, reasons[k]) for k, (_, long) in FLAGS.items() if k in reasons]
    if replies.get("masked"):
        rows.append(("masked", FLAGS["masked"][1], replies["masked"]))
    rows += [
        ("stop", "finished normally", reasons["stop"]),
        ("unknown", "not reported by the service", reasons["unknown"]),
    ]
    return rows


def _problems(summary: Mapping[str, Any], results: Mapping[str, Any]) -> list[str]:
    """What went wrong in the run, for the banner at the top."""
    problems = []
    if summary["errors"]:
        n = summary["errors"]
        problems.append(
            f"{n} test{'s' if n != 1 else ''} failed (no grades): left out of every figure"
        )
    rejected, named = results.get("rejectedScenarios"), results.get("rejectedFirst", [])
    if rejected:
        who = [
            f"{r['seedId']} ({r['riskId']}, {r['ageRange']}): "
            + shorten(r["reasons"], 200, placeholder=" ...")
            for r in named
        ]
        who += [f"and {rejected - len(named)} more"] if named and rejected > len(named) else []
        problems.append(
            f"{rejected} scenario{'s were' if rejected > 1 else ' was'} rejected by validation, "
            f"so {'their seeds have' if rejected > 1 else 'its seed has'} no test"
            + (f": {'; '.join(who)}" if who else "")
            + " (kept with the validator's reasons in the scenarios' .rejected.jsonl)"
        )
    if results.get("stageFailures"):
        n = len(results["stageFailures"])
        stages = sorted({str(s.get("stage")) for s in results["stageFailures"]})
        problems.append(
            f"{n} shard{'s' if n != 1 else ''} ({', '.join(stages)}) recorded failed items"
        )
    if results.get("skippedPrompts"):
        problems.append(
            f"prompt variant(s) {', '.join(results['skippedPrompts'])} not run: "
            f"{results.get('skippedReason', '')}"
        )
    return problems


def _packed(parts: tuple[Any, Iterable[Any]]) -> tuple[str, list[str]]:
    """The list's data and the texts' chunks, packed one after another: xz holds 60-90 MB
    while it packs a chunk of a thousand tests, so two at once on two cores, though faster,
    took the report job over 250 MB on the whole grid (bench/README.md, issue 62)."""
    listing, texts = parts
    return pack(listing), [pack(t) for t in texts]


def render_report(
    records: Sequence[TestRecord],
    results: Mapping[str, Any],
    taxonomy: Taxonomy | None = None,
    summary: Mapping[str, Any] | None = None,
) -> str:
    """The report page of one target's judged tests."""
    names = Names(taxonomy, records)
    summary = summary if summary is not None else build_summary(records, results, taxonomy)
    g = summary["groups"]
    risks_of: dict[str, list[Mapping[str, Any]]] = {}
    for d in g["risk"]:
        risks_of.setdefault(d["riskCategoryId"], []).append(d)
    empty = {"n": 0, "failing": Rate(0, 0).as_dict(), "exemplary": Rate(0, 0).as_dict()}
    target = summary.get("target")
    replies = summary.get("targetReplies")
    nav = [*NAV[:1], ("replies", "Target replies"), *NAV[1:]] if replies else list(NAV)
    if summary.get("humanAgreement"):
        nav.insert(-1, ("people", "Judges vs people"))
    if summary.get("humanLabels"):
        nav.insert(-1, ("corrected", "Corrected rates"))
    bm = benchmarks.of_results(summary)
    nav = [(k, bm.criteria_title if k == "behaviour" else v) for k, v in nav]
    template = environment().get_template("report.html.jinja")
    return template.render(
        benchmark=bm,
        title=f"KORA report: {target or ''}",
        target=target,
        target_model=target_model(results),
        summary=summary,
        results=results,
        problems=_problems(summary, results),
        nav=nav,
        replies=replies,
        reply_rows=_reply_rows(replies),
        names=names,
        help=CRITERION_HELP,
        heat_max=HEAT_MAX,
        groups=g,
        overall_safety=summary["overall"].get("safety", empty),
        risks_of=risks_of,
        ages=sorted({d["ageRange"] for d in g["ageRange"]}, key=age_key),
        cells={(d["riskId"], d["ageRange"]): d["safety"] for d in g["riskAgeRange"]},
        by_age={d["ageRange"]: d["safety"] for d in g["ageRange"]},
        by_prompt={d["prompt"]: d for d in g["prompt"]},
        tests=len(records),
        browser=_packed(browser_data(records, summary["criteria"], names)),
        judge_off=judge_off_count(summary),
        corrected_rows=[
            ("all tests", summary["overall"].get("safety", empty)),
            *((f"age {d['ageRange']}", d["safety"]) for d in g["ageRange"] if "safety" in d),
            *((f"prompt {d['prompt']}", d["safety"]) for d in g["prompt"] if "safety" in d),
        ],
    )


def write_report(
    judgments: Iterable[Judgment | TestRecord | Mapping[str, Any]],
    results: Mapping[str, Any],
    html_path: Path | str,
    summary_path: Path | str | None = None,
    taxonomy: Taxonomy | None = None,
    agreement: Mapping[str, Any] | None = None,
    people: People | None = None,
    manifest: str | None = None,
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write report.html (and summary.json); returns the summary. `agreement`: what
    `kora agreement` found of the judges against people, shown in its own section;
    `people`: their grades (kora.analysis.report.corrected), which correct the rates;
    `manifest`: where the result's manifest is, relative to the report (linked); `usage`:
    its usage.json, for what the target's calls cost a test (`spend`)."""
    records = records_of(judgments)
    summary = build_summary(records, results, taxonomy)
    if manifest is not None:
        summary["manifest"] = manifest
    if (spent := spend(usage, summary["judged"])) is not None:
        summary["spend"] = spent
    if agreement is not None:
        # the judge's grades it keeps for `kora agreement --against` stay out of it
        summary["humanAgreement"] = {k: v for k, v in agreement.items() if k != "judgeGrades"}
    if people is not None:
        add_corrected(summary, records, people)
    write_atomic(html_path, render_report(records, results, taxonomy, summary).encode())
    if summary_path is not None:
        write_json(summary_path, summary)
    return summary


def render_leaderboard(
    doc: Mapping[str, Any],
    taxonomy: Taxonomy | None = None,
    records: Mapping[str, Sequence[TestRecord]] | None = None,
) -> str:
    """The leaderboard page; `records`: each target's tests, for the conversations the
    pairs' cells open side by side (none without them)."""
    rows = doc["targets"]
    names = Names(taxonomy, [])
    pairs = [
        {**p, "grid": grid(p, names), "verdict": overall_verdict(p)} for p in doc.get("pairs") or []
    ]
    template = environment().get_template("leaderboard.html.jinja")
    return template.render(
        title="KORA leaderboard",
        differences=doc.get("differences") or [],
        rows=rows,
        ranked=list(zip(ranks(rows), rows, strict=True)),
        behaviour=doc.get("criteria") or BEHAVIOR_CRITERIA,
        short_labels=SHORT_LABELS,
        pairs=pairs,
        ranking=doc.get("ranking"),
        side=pack(side_by_side(pairs, records or {}, names)),
        alpha=doc["alpha"],
        names=names,
        corrected_ranked=[
            (i, next(r for r in rows if r["target"] == t))
            for i, t in enumerate(doc.get("correctedRanking") or [], 1)
        ],
    )
