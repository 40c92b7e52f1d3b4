"""How sure is each figure: intervals, paired tests, judge agreement, signal checks.

Pure functions over counts, plus the test records the report and the `kora compare`,
`kora compare-targets` and `kora stats` commands share:

- `wilson`: the 95 % Wilson score interval of a rate k/n (well behaved at 0 and n, unlike
  the normal approximation).
- `paired_test`: two targets (or two prompt variants) on the same tests, failing or not:
  the exact McNemar test, a two-sided sign test on the discordant pairs.
- `fleiss_kappa`, `percent_agreement`: agreement of several judges on the same tests.
- `flip_matrix`, `cohen_kappa`: two judgment sets of the same tests, grade by grade.
- `no_signal`: a criterion whose grades sit >= 95 % in one grade does not discriminate.
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from kora.errors import InputError

GRADES: tuple[str, ...] = ("failing", "adequate", "exemplary")
BEHAVIOR_CRITERIA: tuple[str, ...] = ("anthropomorphism", "epistemicHumility", "humanRedirection")
CRITERIA: tuple[str, ...] = ("safety", *BEHAVIOR_CRITERIA)
CRITERION_LABELS: dict[str, str] = {
    "safety": "Safety",
    "anthropomorphism": "Anthropomorphism",
    "epistemicHumility": "Epistemic humility",
    "humanRedirection": "Human redirection",
}
Z95 = 1.959963984540054  # two-sided 95 % normal quantile
ALPHA = 0.05
NO_SIGNAL_SHARE = 0.95

K = TypeVar("K", bound=Hashable)


# --- rates ------------------------------------------------------------------------------


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials; (0, 1) when n is 0."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # exact ends at 0 and n (the formula gives them up to rounding)
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class Rate:
    """k of n, with its 95 % Wilson interval."""

    k: int
    n: int

    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.k, self.n)

    def as_dict(self) -> dict[str, Any]:
        low, high = self.interval
        r = self.rate
        return {
            "k": self.k,
            "n": self.n,
            "rate": None if r is None else round(r, 6),
            "low": round(low, 6),
            "high": round(high, 6),
        }

    def text(self, digits: int = 1) -> str:
        """'12.5% [8.1–18.7]' (or '–' without tests)."""
        if not self.n:
            return "–"
        low, high = self.interval
        return f"{pct(self.rate, digits)} [{pct(low, digits)}–{pct(high, digits)}]"


def pct(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "–"
    return f"{100 * x:.{digits}f}%"


def grade_counts(grades: Iterable[str]) -> dict[str, int]:
    c = Counter(grades)
    return {g: c.get(g, 0) for g in GRADES}


def no_signal(counts: Mapping[str, int], threshold: float = NO_SIGNAL_SHARE) -> bool:
    """True when one grade holds at least `threshold` of the tests: nothing to tell apart."""
    n = sum(counts.values())
    return n > 0 and max(counts.values()) / n >= threshold


# --- paired comparison ------------------------------------------------------------------


def sign_test(b: int, c: int) -> float:
    """Exact two-sided sign test (exact McNemar) on b vs c discordant pairs."""
    if b + c == 0 or b == c:
        return 1.0
    # imported here: scipy.stats takes a moment to load, and most `kora` commands never
    # compare anything
    from scipy.stats import binomtest

    # exact, and fast for any count (summing big binomial coefficients took tens of seconds at 20,000 pairs)
    return min(1.0, float(binomtest(min(b, c), b + c, 0.5).pvalue))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (same order as given)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class Paired:
    """Failing-or-not of A and B on the same n tests.

    `a_only`: tests A fails and B does not; `b_only`: the reverse. The exact McNemar test
    asks whether those two counts differ by more than chance.
    """

    n: int
    a_failing: int
    b_failing: int
    a_only: int
    b_only: int
    p: float

    @property
    def diff(self) -> float | None:
        """A's failing rate minus B's, on the paired tests."""
        return (self.a_failing - self.b_failing) / self.n if self.n else None

    def significant(self, alpha: float = ALPHA) -> bool:
        return self.p < alpha

    def verdict(self, a: str, b: str, alpha: float = ALPHA, p: float | None = None) -> str:
        p = self.p if p is None else p
        if not self.n:
            return "no paired tests"
        if p >= alpha:
            return "no significant difference"
        worse = a if self.a_failing > self.b_failing else b
        return f"{worse} fails more often"

    def as_dict(self) -> dict[str, Any]:
        d = self.diff
        return {
            "n": self.n,
            "aFailing": Rate(self.a_failing, self.n).as_dict(),
            "bFailing": Rate(self.b_failing, self.n).as_dict(),
            "aOnly": self.a_only,
            "bOnly": self.b_only,
            "diff": None if d is None else round(d, 6),
            "p": self.p,
        }


def paired_test(a: Mapping[K, bool], b: Mapping[K, bool]) -> Paired:
    """Exact McNemar test of failing (True) vs not, on the keys A and B share."""
    keys = a.keys() & b.keys()
    a_only = sum(1 for k in keys if a[k] and not b[k])
    b_only = sum(1 for k in keys if b[k] and not a[k])
    return Paired(
        n=len(keys),
        a_failing=sum(1 for k in keys if a[k]),
        b_failing=sum(1 for k in keys if b[k]),
        a_only=a_only,
        b_only=b_only,
        p=sign_test(a_only, b_only),
    )


# --- agreement --------------------------------------------------------------------------


def ratings_table(
    ratings: Iterable[Sequence[str]], categories: Sequence[str] = GRADES
) -> list[list[int]]:
    """Subjects x categories counts, from each subject's list of raters' labels."""
    index = {c: i for i, c in enumerate(categories)}
    table = []
    for labels in ratings:
        row = [0] * len(categories)
        for label in labels:
            row[index[label]] += 1
        table.append(row)
    return table


def _raters(table: Sequence[Sequence[int]]) -> int:
    counts = {sum(row) for row in table}
    if len(counts) > 1:
        raise ValueError(f"every subject needs the same number of ratings, got {sorted(counts)}")
    n = counts.pop() if counts else 0
    if table and n < 2:
        raise ValueError("agreement needs at least 2 ratings per subject")
    return n


def percent_agreement(table: Sequence[Sequence[int]]) -> float | None:
    """Mean share of agreeing rater pairs per subject (Fleiss' P-bar); 2 raters: share equal."""
    n = _raters(table)
    if not table:
        return None
    per = [(sum(x * x for x in row) - n) / (n * (n - 1)) for row in table]
    return sum(per) / len(per)


def unanimous_share(table: Sequence[Sequence[int]]) -> float | None:
    """Share of subjects on which every rater gave the same label."""
    n = _raters(table)
    if not table:
        return None
    return sum(1 for row in table if max(row) == n) / len(table)


def fleiss_kappa(table: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of a subjects x categories count table (same raters count per subject).

    None when undefined: no subjects, or every rating in one category (chance agreement 1).
    """
    n = _raters(table)
    if not table:
        return None
    subjects = len(table)
    total = subjects * n
    p_j = [sum(row[j] for row in table) / total for j in range(len(table[0]))]
    p_e = sum(p * p for p in p_j)
    p_bar = sum((sum(x * x for x in row) - n) / (n * (n - 1)) for row in table) / subjects
    if math.isclose(p_e, 1.0):
        return None
    return (p_bar - p_e) / (1 - p_e)


def flip_matrix(
    pairs: Iterable[tuple[str, str]], categories: Sequence[str] = GRADES
) -> list[list[int]]:
    """3x3 counts: row = grade in A, column = grade in B (failing, adequate, exemplary)."""
    index = {c: i for i, c in enumerate(categories)}
    m = [[0] * len(categories) for _ in categories]
    for a, b in pairs:
        m[index[a]][index[b]] += 1
    return m


def matrix_agreement(m: Sequence[Sequence[int]]) -> float | None:
    n = sum(sum(r) for r in m)
    return sum(m[i][i] for i in range(len(m))) / n if n else None


def cohen_kappa(m: Sequence[Sequence[int]]) -> float | None:
    """Cohen's kappa of a square agreement matrix; None when undefined."""
    n = sum(sum(r) for r in m)
    if not n:
        return None
    po = sum(m[i][i] for i in range(len(m))) / n
    rows = [sum(r) / n for r in m]
    cols = [sum(m[i][j] for i in range(len(m))) / n for j in range(len(m))]
    pe = sum(r * c for r, c in zip(rows, cols, strict=True))
    if math.isclose(pe, 1.0):
        return None
    return (po - pe) / (1 - pe)


# --- test records -----------------------------------------------------------------------


@dataclass
class Criterion:
    grade: str
    count: float | None = None
    reasons: str = ""
    not_triggered: bool = False


@dataclass
class JudgeGrades:
    judge: str
    criteria: dict[str, Criterion]


@dataclass
class TestRecord:
    """One judged test, from the project's Judgment JSONL or a reference per-test JSON.

    `criteria` holds `safety` and each behaviour criterion (or, for canonical-HEAD
    records, each mechanism); it is empty when the test failed (`error` set).
    """

    key: str
    category: str
    risk: str
    age: str
    scenario_id: str
    prompt: str
    criteria: dict[str, Criterion] = field(default_factory=dict)
    judges: list[JudgeGrades] = field(default_factory=list)
    error: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def pair_key(self) -> tuple[str, str]:
        """What matches a test across targets: the scenario and the prompt variant."""
        return self.scenario_id, self.prompt

    @property
    def failing(self) -> bool:
        return self.criteria["safety"].grade == "failing"


def _criterion(obj: Any, where: str) -> Criterion:
    if not isinstance(obj, dict) or obj.get("grade") not in GRADES:
        raise InputError(f"{where}: expected {{grade: failing|adequate|exemplary, ...}}")
    count = obj.get("occurrenceCount")
    return Criterion(
        grade=obj["grade"],
        count=float(count) if isinstance(count, int | float) else None,
        reasons=str(obj.get("reasons", "")),
        not_triggered=bool(obj.get("notTriggered", False)),
    )


def _criteria(assessment: Any, behavior: Any, where: str) -> dict[str, Criterion]:
    out = {"safety": _criterion(assessment, f"{where}: assessment")}
    if not isinstance(behavior, dict):
        raise InputError(f"{where}: behaviorAssessment missing or not an object")
    for name, value in behavior.items():
        out[name] = _criterion(value, f"{where}: behaviorAssessment.{name}")
    return out


def record_from_dict(obj: Any, where: str) -> TestRecord | None:
    """A TestRecord from a Judgment or a reference per-test result; None for other records
    (a conversation shard's line has no grades and no error: not a judgment)."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object")
    scenario = obj.get("scenario")
    if not isinstance(scenario, dict):
        raise InputError(f"{where}: missing field scenario")
    seed_obj = scenario.get("seed")
    seed: dict[str, Any] = seed_obj if isinstance(seed_obj, dict) else {}
    ids = {
        k: scenario.get(k) or seed.get(k) for k in ("riskCategoryId", "riskId", "ageRange", "id")
    }
    prompt = obj.get("prompt")
    missing = [k for k, v in {**ids, "prompt": prompt}.items() if not isinstance(v, str)]
    if missing:
        raise InputError(f"{where}: missing field {missing[0]}")
    key = obj.get("key") or ":".join(
        (ids["riskCategoryId"], ids["riskId"], ids["ageRange"], ids["id"], prompt)  # type: ignore[arg-type]
    )
    rec = TestRecord(
        key=str(key),
        category=str(ids["riskCategoryId"]),
        risk=str(ids["riskId"]),
        age=str(ids["ageRange"]),
        scenario_id=str(ids["id"]),
        prompt=str(prompt),
        raw=obj,
    )
    if obj.get("error"):
        rec.error = str(obj["error"])
        return rec
    if "assessment" not in obj:
        return None
    behavior = obj.get("behaviorAssessment", obj.get("mechanismAssessment"))
    rec.criteria = _criteria(obj.get("assessment"), behavior, where)
    verdicts = obj.get("judges", obj.get("judgeAssessments")) or []
    for i, v in enumerate(verdicts):
        w = f"{where}: judges[{i}]"
        if not isinstance(v, dict):
            raise InputError(f"{w}: expected an object")
        name = v.get("judge", v.get("judgeModelSlug", f"judge {i + 1}"))
        jb = v.get("behaviorAssessment", v.get("mechanismAssessment"))
        rec.judges.append(JudgeGrades(str(name), _criteria(v.get("assessment"), jb, w)))
    return rec


def _is_input_file(p: Path) -> bool:
    name = p.name
    if name.startswith(".") or name in ("results.json", "usage.json", "summary.json"):
        return False
    if name.endswith((".status.json", ".usage.json", ".rejected.jsonl")):
        return False
    return name.endswith((".json", ".jsonl"))


def _iter_files(path: Path, workdir: Path) -> Iterator[Path]:
    import zipfile

    if path.is_dir():
        # a target's results folder: its judgments, not its conversations
        if (path / "judgments").is_dir():
            path = path / "judgments"
        yield from sorted(p for p in path.rglob("*") if p.is_file() and _is_input_file(p))
    elif path.is_file() and path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if _is_input_file(Path(n))]
            for n in names:
                zf.extract(n, workdir)
        yield from sorted(workdir / n for n in names)
    elif path.is_file() and path.suffix in (".json", ".jsonl"):
        yield path
    elif not path.exists():
        raise InputError(f"{path}: no such file or folder")
    else:
        raise InputError(f"{path}: expected a folder, a .zip or a .json/.jsonl file of judgments")


def records_of_file(path: Path) -> Iterator[TestRecord]:
    data = path.read_bytes()
    if path.suffix == ".json":
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON: {exc}") from None
        items: list[tuple[str, Any]] = (
            [(f"{path}[{i}]", o) for i, o in enumerate(obj)]
            if isinstance(obj, list)
            else [(str(path), obj)]
        )
    else:
        items = []
        for lineno, line in enumerate(data.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append((f"{path}:{lineno}", orjson.loads(line)))
            except orjson.JSONDecodeError as exc:
                raise InputError(f"{path}:{lineno}: not valid JSON: {exc}") from None
    for where, obj in items:
        rec = record_from_dict(obj, where)
        if rec is not None:
            yield rec


def load_records(paths: Iterable[Path | str]) -> list[TestRecord]:
    """Every judged test under the given folders, .zip files or JSON/JSONL files.

    A test key seen twice keeps its last record (a re-judged test replaces the old one).
    """
    by_key: dict[str, TestRecord] = {}
    with tempfile.TemporaryDirectory(prefix="kora-stats-") as tmp:
        for p in paths:
            for f in _iter_files(Path(p), Path(tmp)):
                for rec in records_of_file(f):
                    by_key[rec.key] = rec
    return list(by_key.values())


def judged(records: Iterable[TestRecord]) -> list[TestRecord]:
    return [r for r in records if r.error is None and r.criteria]


# --- summaries --------------------------------------------------------------------------


def criterion_summary(items: Sequence[Criterion]) -> dict[str, Any]:
    """n, grade counts and shares, failing / exemplary rates with CIs, mean count, signal."""
    triggered = [c for c in items if not c.not_triggered]
    counts = grade_counts(c.grade for c in triggered)
    n = len(triggered)
    out: dict[str, Any] = {
        "n": n,
        "counts": counts,
        "failing": Rate(counts["failing"], n).as_dict(),
        "adequate": Rate(counts["adequate"], n).as_dict(),
        "exemplary": Rate(counts["exemplary"], n).as_dict(),
    }
    occ = [c.count for c in triggered if c.count is not None]
    if occ:
        out["meanOccurrences"] = round(sum(occ) / len(occ), 4)
    if len(triggered) < len(items):
        out["notTriggered"] = len(items) - len(triggered)
    out["noSignal"] = no_signal(counts)
    return out


def group_summary(
    records: Sequence[TestRecord], criteria: Sequence[str] = CRITERIA
) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(records)}
    for c in criteria:
        out[c] = criterion_summary([r.criteria[c] for r in records if c in r.criteria])
    return out


def criteria_of(records: Iterable[TestRecord]) -> list[str]:
    """The criteria present, safety and the reference behaviour criteria first."""
    seen: dict[str, None] = {}
    for r in records:
        for c in r.criteria:
            seen.setdefault(c, None)
    first = [c for c in CRITERIA if c in seen]
    return first + sorted(c for c in seen if c not in CRITERIA)


def judge_agreement(
    records: Sequence[TestRecord], criteria: Sequence[str] = CRITERIA
) -> dict[str, Any] | None:
    """Per criterion: percent agreement, unanimity and Fleiss' kappa across the judges.

    Uses the tests graded by the most common number of judges (>= 2); None with one judge.
    """
    sizes = Counter(len(r.judges) for r in records if len(r.judges) >= 2)
    if not sizes:
        return None
    raters = sizes.most_common(1)[0][0]
    rs = [r for r in records if len(r.judges) == raters]
    names = [j.judge for j in rs[0].judges]
    out: dict[str, Any] = {"judges": names, "raters": raters, "tests": len(rs), "criteria": {}}
    for c in criteria:
        ratings = [
            [j.criteria[c].grade for j in r.judges]
            for r in rs
            if all(c in j.criteria and not j.criteria[c].not_triggered for j in r.judges)
        ]
        table = ratings_table(ratings)
        per_judge = {
            name: grade_counts(
                r.judges[i].criteria[c].grade for r in rs if c in r.judges[i].criteria
            )
            for i, name in enumerate(names)
        }
        out["criteria"][c] = {
            "n": len(table),
            "percentAgreement": _round(percent_agreement(table)),
            "unanimous": _round(unanimous_share(table)),
            "fleissKappa": _round(fleiss_kappa(table)),
            "perJudge": per_judge,
        }
    return out


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def kappa_label(k: float | None) -> str:
    """Landis & Koch's wording for a kappa value."""
    if k is None:
        return "undefined"
    if k < 0:
        return "poor"
    for bound, label in ((0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial")):
        if k <= bound:
            return label
    return "almost perfect"


def compare_judgments(a: Sequence[TestRecord], b: Sequence[TestRecord]) -> dict[str, Any]:
    """Join two judgment sets by test key: agreement, Cohen's kappa, flip matrix per criterion."""
    ja = {r.key: r for r in judged(a)}
    jb = {r.key: r for r in judged(b)}
    shared = [k for k in ja if k in jb]
    crits = [
        c for c in criteria_of(ja[k] for k in shared) if all(c in jb[k].criteria for k in shared)
    ]
    out: dict[str, Any] = {
        "matched": len(shared),
        "onlyA": len(ja.keys() - jb.keys()),
        "onlyB": len(jb.keys() - ja.keys()),
        "criteria": {},
    }
    for c in crits:
        pairs = [
            (ja[k].criteria[c].grade, jb[k].criteria[c].grade)
            for k in shared
            if c in ja[k].criteria
            and not ja[k].criteria[c].not_triggered
            and not jb[k].criteria[c].not_triggered
        ]
        m = flip_matrix(pairs)
        out["criteria"][c] = {
            "n": len(pairs),
            "agreement": _round(matrix_agreement(m)),
            "cohenKappa": _round(cohen_kappa(m)),
            "matrix": m,
            "aCounts": dict(zip(GRADES, (sum(r) for r in m), strict=True)),
            "bCounts": dict(
                zip(GRADES, (sum(m[i][j] for i in range(3)) for j in range(3)), strict=True)
            ),
        }
    return out


def paired_comparison(
    a: Sequence[TestRecord],
    b: Sequence[TestRecord],
    key: Callable[[TestRecord], Hashable],
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """Safety failing-or-not of A and B on the tests matched by `key`, overall and per risk.

    Overall: exact McNemar. Per risk: the same, with Holm-adjusted p-values across the
    risks (significant = adjusted p < alpha), so a long table does not cry wolf.
    """
    fa = {key(r): r for r in judged(a)}
    fb = {key(r): r for r in judged(b)}
    overall = paired_test(
        {k: r.failing for k, r in fa.items()}, {k: r.failing for k, r in fb.items()}
    )
    risks: dict[str, str] = {}
    for k, r in fa.items():
        if k in fb:
            risks.setdefault(r.risk, r.category)
    tests = [
        paired_test(
            {k: r.failing for k, r in fa.items() if r.risk == risk},
            {k: r.failing for k, r in fb.items() if r.risk == risk},
        )
        for risk in risks
    ]
    adjusted = holm([t.p for t in tests])
    per = [
        {
            "riskCategoryId": category,
            "riskId": risk,
            **t.as_dict(),
            "pHolm": adj,
            "significant": adj < alpha,
        }
        for (risk, category), t, adj in zip(risks.items(), tests, adjusted, strict=True)
    ]
    return {
        "alpha": alpha,
        "method": "exact McNemar (two-sided sign test on discordant pairs); per risk Holm-adjusted",
        "onlyA": len(fa.keys() - fb.keys()),
        "onlyB": len(fb.keys() - fa.keys()),
        "overall": {**overall.as_dict(), "significant": overall.significant(alpha)},
        "risks": per,
    }


def compare_targets(
    a: Sequence[TestRecord], b: Sequence[TestRecord], alpha: float = ALPHA
) -> dict[str, Any]:
    """Two targets on the same tests, matched by scenario id and prompt variant."""
    return paired_comparison(a, b, lambda r: r.pair_key, alpha)


def compare_prompts(records: Sequence[TestRecord], alpha: float = ALPHA) -> dict[str, Any] | None:
    """`default` (A) vs `child` (B) on the scenarios run with both; None without both."""
    ok = judged(records)
    default = [r for r in ok if r.prompt == "default"]
    child = [r for r in ok if r.prompt == "child"]
    if not default or not child:
        return None
    return paired_comparison(default, child, lambda r: r.scenario_id, alpha)


# --- commands (wired into kora.cli) -----------------------------------------------------


def _fmt(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _label(c: str) -> str:
    return CRITERION_LABELS.get(c, c)


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
        mean = _fmt(s.get("meanOccurrences"), 2)
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


def format_matrix(m: Sequence[Sequence[int]], a: str = "A", b: str = "B") -> str:
    w = max(9, *(len(str(x)) for row in m for x in row))
    corner = a + " \\ " + b
    head = f"{corner:<14}" + "".join(f"{g:>{w + 1}}" for g in GRADES)
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
            f"{_label(c)} ({c}): n {s['n']}, agreement {agree}, {flips} flipped, "
            f"Cohen's kappa {_fmt(s['cohenKappa'])} ({kappa_label(s['cohenKappa'])})",
            format_matrix(s["matrix"]),
        ]
    return "\n".join(lines)


def format_compare_targets(doc: Mapping[str, Any], a: str, b: str) -> str:
    o = doc["overall"]
    alpha = doc["alpha"]

    def line(label: str, d: Mapping[str, Any], p_key: str = "p") -> str:
        ra, rb = d["aFailing"], d["bFailing"]
        sig = "SIGNIFICANT" if d["significant"] else "n.s."
        diff = "–" if d["diff"] is None else f"{100 * d['diff']:+.1f} pts"
        return (
            f"{label:<44} {d['n']:>5}  {pct(ra['rate']):>7} vs {pct(rb['rate']):<7} {diff:>11}"
            f"  A-only {d['aOnly']:>4}  B-only {d['bOnly']:>4}  p={d[p_key]:.4g}  {sig}"
        )

    lines = [
        f"A = {a}",
        f"B = {b}",
        f"safety failing rate on paired tests (same scenario and prompt); {doc['method']}; alpha {alpha}",
        f"unpaired: only in A {doc['onlyA']}, only in B {doc['onlyB']}",
        "",
        f"{'group':<44} {'n':>5}  {'A':>7}    {'B':<7} {'A - B':>11}",
        line("overall", o),
    ]
    lines += [line(r["riskId"], r, "pHolm") for r in doc["risks"]]
    sig = [r["riskId"] for r in doc["risks"] if r["significant"]]
    verdict = (
        "no significant difference"
        if not o["significant"]
        else (
            f"{a if o['aFailing']['k'] > o['bFailing']['k'] else b} fails significantly more often"
        )
    )
    lines += [
        "",
        f"overall: {verdict}",
        f"risks with a significant difference: {', '.join(sig) or 'none'}",
    ]
    return "\n".join(lines)


def _print_json(obj: Any) -> None:
    print(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())


def resolve_target(name: str, results_dir: str = "results") -> Path:
    """A path as given if it exists, else results/<name> (a target's folder)."""
    p = Path(name)
    if p.exists():
        return p
    q = Path(results_dir) / name
    if q.exists():
        return q
    raise InputError(f"{name}: neither a path nor a target with results under {results_dir}/")


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


def add_compare_arguments(p: Any) -> None:
    p.add_argument("a", help="judgment set A: folder, .zip or JSON/JSONL file(s)")
    p.add_argument("b", help="judgment set B, joined to A by test key")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def add_compare_targets_arguments(p: Any) -> None:
    p.add_argument("a", help="target name (results/<name>) or a judgments folder / file")
    p.add_argument("b", help="the other target")
    p.add_argument("--alpha", type=float, default=ALPHA, help="significance level (0.05)")
    p.add_argument("--results-dir", default="results", help="where target folders live")
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
        _print_json(doc)
        return 0
    print(format_stats(records, threshold, criteria))
    if getattr(args, "by_judge", False):
        for j, rs in _by_judge(records).items():
            print(f"\njudge {j}:")
            print(format_stats(rs, threshold, criteria))
    return 0


def cmd_compare(args: Any) -> int:
    """`kora compare A B`: two judgment sets joined by test key, agreement and flip matrices."""
    a, b = load_records([args.a]), load_records([args.b])
    doc = compare_judgments(a, b)
    if not doc["matched"]:
        raise InputError(
            f"no test key is in both {args.a} ({len(a)} tests) and {args.b} ({len(b)} tests)"
        )
    if getattr(args, "json", False):
        _print_json(doc)
    else:
        print(format_compare(doc, str(args.a), str(args.b)))
    return 0


def cmd_compare_targets(args: Any) -> int:
    """`kora compare-targets A B`: paired exact McNemar on safety failures, overall and per risk."""
    results_dir = getattr(args, "results_dir", "results")
    pa, pb = resolve_target(args.a, results_dir), resolve_target(args.b, results_dir)
    doc = compare_targets(
        load_records([pa]), load_records([pb]), float(getattr(args, "alpha", ALPHA))
    )
    if not doc["overall"]["n"]:
        raise InputError(f"{args.a} and {args.b} share no test (same scenario id and prompt)")
    if getattr(args, "json", False):
        _print_json(doc)
    else:
        print(format_compare_targets(doc, str(args.a), str(args.b)))
    return 0
