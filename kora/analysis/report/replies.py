"""Empty and cut-short replies of the target: why each reply ended, as its API said.

A conversation records, per target reply, its finish reason and whether it was empty
(`kora.benchmarks.outcomes.TargetTurn`). A reply cut at the length limit, blocked by the provider's
filter, refused through the API or empty is still judged as it stands; the report counts
them and flags them in the conversation browser, so a reader can tell a target that
answered badly from one that did not answer. Records without turns (imported ones) count
for nothing here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kora.analysis.records import TestRecord
from kora.benchmarks.outcomes import TargetTurn
from kora.llm.base import FINISH_REASONS

# flag -> (short, for a row; long, for the reply itself and the summary)
FLAGS: dict[str, tuple[str, str]] = {
    "empty": ("empty", "empty reply"),
    "max_tokens": ("cut", "cut at the length limit"),
    "content_filter": ("filtered", "blocked or cut by the provider's content filter"),
    "refusal": ("refused", "refused through the API's refusal channel"),
    "other": ("other end", "ended for another reason the provider gave"),
    "masked": ("masked", "held a secret of the target's, written as ****"),
}


def turn_flags(turn: TargetTurn) -> list[str]:
    """What was wrong with one reply ([] for a reply that finished normally or said nothing
    about how it ended)."""
    flags = ["empty"] if turn.empty else []
    if turn.finishReason is not None and turn.finishReason != "stop":
        flags.append(turn.finishReason)
    if turn.masked:
        flags.append("masked")
    return flags


def reply_summary(records: Sequence[TestRecord]) -> dict[str, Any] | None:
    """Counts over the replies of every test that recorded its turns; None when none did."""
    with_turns = [r for r in records if r.turns]
    if not with_turns:
        return None
    turns = [t for r in with_turns for t in r.turns]
    reasons = Counter[str](t.finishReason or "unknown" for t in turns)
    masked = sum(1 for t in turns if t.masked)
    return {
        "tests": len(with_turns),
        "replies": len(turns),
        "empty": sum(1 for t in turns if t.empty),
        # replies that held a secret of the target's (written as ****); only when any did
        **({"masked": masked} if masked else {}),
        # `unknown`: the service does not say why a reply ended (chat endpoints)
        "finishReasons": {k: reasons.get(k, 0) for k in (*FINISH_REASONS, "unknown")},
        "flaggedTests": sum(
            1 for r in with_turns if any(set(turn_flags(t)) - {"masked"} for t in r.turns)
        ),
        **latency_summary(turns),
    }


def latency_summary(turns: Sequence[TargetTurn]) -> dict[str, Any]:
    """How long the target took to answer, over the replies that were timed: product
    teams ask how slow it is for a child. {} when none was."""
    times = sorted(t.latency for t in turns if t.latency is not None)
    if not times:
        return {}

    def at(q: float) -> float:  # nearest-rank percentile: a time some reply really took
        return times[min(len(times) - 1, max(0, math.ceil(q * len(times)) - 1))]

    return {
        "latency": {
            "replies": len(times),
            "median": at(0.5),
            "p90": at(0.9),
            "p99": at(0.99),
            "max": times[-1],
            "mean": round(sum(times) / len(times), 3),
        }
    }
