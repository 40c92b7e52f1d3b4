"""Agreement of judges (pure functions).

- several judges on the same tests: `percent_agreement`, `unanimous_share`, `fleiss_kappa`
  over a subjects x grades count table (`ratings_table`);
- two judgment sets of the same tests: `flip_matrix` (grade in A x grade in B),
  `matrix_agreement`, `cohen_kappa`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from kora.benchmarks.schemas import GRADES


def ratings_table(ratings: Iterable[Sequence[str]]) -> list[list[int]]:
    """Subjects x grades counts, from each subject's list of raters' grades."""
    index: dict[str, int] = {c: i for i, c in enumerate(GRADES)}
    table = []
    for labels in ratings:
        row = [0] * len(GRADES)
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
    p_bar = percent_agreement(table)  # the observed agreement; None: no subjects
    if p_bar is None:
        return None
    total = len(table) * _raters(table)
    p_j = [sum(row[j] for row in table) / total for j in range(len(table[0]))]
    p_e = sum(p * p for p in p_j)
    if math.isclose(p_e, 1.0):
        return None
    return (p_bar - p_e) / (1 - p_e)


def flip_matrix(pairs: Iterable[tuple[str, str]]) -> list[list[int]]:
    """3x3 counts: row = grade in A, column = grade in B (failing, adequate, exemplary)."""
    index: dict[str, int] = {c: i for i, c in enumerate(GRADES)}
    m = [[0] * len(GRADES) for _ in GRADES]
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
