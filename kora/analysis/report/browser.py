"""The conversation browser's data: every test of the report, embedded in the page in two
parts, so that the list and its filters show before the long texts are opened.

The first part (data block #kora-data) holds what the list needs; keys are one or two
letters (a run has thousands of tests): per test `k` key, `s` scenario id, `r` risk, `a`
age range, `p` prompt, `e` error, `g` grade per criterion, `n` count per behaviour
criterion, `j` each judge's `{name, g, n}` (g and n left out when they are the test's),
`f` per target reply its flags (empty, cut, ...; only for tests with a flagged reply);
`titles` each scenario's title. The second holds the texts, in chunks of TEXT_CHUNK tests
in the list's order (data blocks .kora-text, opened after the first view or when a search
or a conversation needs them): `from` the index of the chunk's first test, `m` each test's
[[role, text], ...], `r` each judge's reasons per criterion, and `scenarios` what the
browser shows of the scenarios whose first test is in the chunk. Both are packed
(kora.analysis.pagekit.pack): at 12,000 conversations the texts are nine tenths of the
data, and xz makes LLM-written prose about a fifth (bench/report_browser.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from kora.analysis.records import JudgeGrades, TestRecord, criterion_label, whole
from kora.analysis.report.names import Names, age_key, prompt_key
from kora.analysis.report.replies import FLAGS, turn_flags

# Chunks let the report's writer hold one at a time (report.pages), and the page open each
# as its own stream; a thousand tests make 2 to 15 MB of JSON, about the 8 MiB that xz's
# window spans (kora.analysis.pagekit.PACK_PRESET), so a larger chunk would gain little.
TEXT_CHUNK = 1000


def _count(x: float | None) -> int | float | None:
    if x is None:
        return None
    return int(x) if float(x).is_integer() else x


def _scenario(sc: dict[str, Any]) -> dict[str, str]:
    """What the browser shows of a scenario: its title, the child, and the narrative."""
    seed = sc.get("seed") or {}
    mot = seed.get("motivation")
    age = seed.get("childAge")
    child = ", ".join(
        str(x)
        for x in (
            f"{age:g} years" if isinstance(age, int | float) else None,
            seed.get("childGender"),
            seed.get("childRaceEthnicity"),
        )
        if x
    )
    if seed.get("childCognitiveMaturity"):
        child += (
            f"; cognitive maturity {seed.get('childCognitiveMaturity')}, "
            f"emotional {seed.get('childEmotionalMaturity')}"
        )
    signal = ", ".join(
        str(x)
        for x in (
            seed.get("riskSignalType") and f"{seed['riskSignalType']} signal",
            seed.get("socialContext"),
        )
        if x
    )
    entry = {
        "title": sc.get("shortTitle", ""),
        "child": child,
        "motivation": mot.get("name", "") if isinstance(mot, dict) else "",
        "signal": signal,
        "maturity": sc.get("childMaturity", ""),
        "background": sc.get("childBackground", ""),
        "narrative": sc.get("narrative", ""),
        "criteria": sc.get("evaluationCriteria", ""),
        "memory": sc.get("modelMemory", ""),
    }
    return {k: v for k, v in entry.items() if v}


def _judge(
    v: JudgeGrades, crits: Sequence[str], behaviour: Sequence[str], test: dict[str, Any]
) -> dict[str, Any]:
    """A judge's grades and counts, left out when they are the test's own (a run's one
    judge): they were over a quarter of the list's data, which the first view waits for."""
    g = [v.criteria[c].grade if c in v.criteria else None for c in crits]
    n = [_count(v.criteria[c].count) if c in v.criteria else None for c in behaviour]
    return (
        {"name": v.judge} if (g, n) == (test["g"], test["n"]) else {"name": v.judge, "g": g, "n": n}
    )


def _reasons(r: TestRecord, crits: Sequence[str]) -> list[list[str]]:
    """Each judge's reasons per criterion (none for a failed test)."""
    if r.error is not None:
        return []
    # reference records: the one (combined) verdict
    verdicts = r.judges or [JudgeGrades(str(r.raw.get("judge", "judge")), r.criteria)]
    return [[v.criteria[c].reasons if c in v.criteria else "" for c in crits] for v in verdicts]


def _chunks(
    ordered: Sequence[TestRecord], tests: Sequence[dict[str, Any]], crits: Sequence[str]
) -> Iterator[dict[str, Any]]:
    """The texts' chunks, one at a time: only the chunk's records are read whole."""
    placed: set[str] = set()
    for start in range(0, len(ordered), TEXT_CHUNK):
        end = start + TEXT_CHUNK
        messages, reasons, own = [], [], {}
        for t, r in zip(tests[start:end], map(whole, ordered[start:end]), strict=True):
            raw = r.raw
            if t["s"] not in placed:
                placed.add(t["s"])
                own[t["s"]] = _scenario(raw.get("scenario") or {})
            messages.append(
                [[m.get("role", ""), m.get("content", "")] for m in raw.get("messages") or []]
            )
            reasons.append(_reasons(r, crits))
        yield {"from": start, "m": messages, "r": reasons, "scenarios": own}


def browser_data(
    records: Sequence[TestRecord], crits: Sequence[str], names: Names
) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """The two parts: (the list's data, the texts' chunks, made as they are read)."""
    titles: dict[str, str] = {}
    tests: list[dict[str, Any]] = []
    behaviour = [c for c in crits if c != "safety"]
    ordered = sorted(records, key=names.record_key)
    for r in ordered:
        raw = r.raw
        if r.scenario_id not in titles:
            titles[r.scenario_id] = (raw.get("scenario") or {}).get("shortTitle") or ""
        t: dict[str, Any] = {
            "k": r.key,
            "s": r.scenario_id,
            "r": r.risk,
            "a": r.age,
            "p": r.prompt,
        }
        flags = [turn_flags(x) for x in r.turns]
        if any(flags):  # no flags at all is what most tests have: the page reads none
            t["f"] = flags
        if r.error is not None:
            t["e"] = r.error
        else:
            t["g"] = [r.criteria[c].grade if c in r.criteria else None for c in crits]
            t["n"] = [_count(r.criteria[c].count) if c in r.criteria else None for c in behaviour]
            verdicts = r.judges or [JudgeGrades(str(raw.get("judge", "judge")), r.criteria)]
            t["j"] = [_judge(v, crits, behaviour, t) for v in verdicts]
        tests.append(t)
    # taxonomy order, not a set's: the page is the same bytes for the same run
    risk_order = sorted({r.risk for r in records}, key=names.risk_key)
    return {
        "criteria": list(crits),
        "criterionLabels": {c: criterion_label(c) for c in crits},
        "risks": {
            rid: {"name": names.risk(rid), "category": names.risk_category.get(rid, "")}
            for rid in risk_order
        },
        "riskOrder": risk_order,
        "ages": sorted({r.age for r in records}, key=age_key),
        "prompts": sorted({r.prompt for r in records}, key=prompt_key),
        "multiJudge": any(len(r.judges) > 1 for r in records),
        "hasTurns": any(r.turns for r in records),
        "replyFlags": {k: {"short": short, "long": long} for k, (short, long) in FLAGS.items()},
        "titles": titles,
        "tests": tests,
    }, _chunks(ordered, tests, crits)
