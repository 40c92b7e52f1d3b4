"""`kora continue`: recorded conversations carried on to each risk's length, then judged.

The canonical KORA v2 `continue` command takes conversations recorded with a target
(`{id, modelId, scenario, prompt, messages}` per line, whole child/target turns) and asks
only the turns they lack: a 3-turn recording of a relationship risk gets turns 4 to 8
from the simulated child and the same target, and the whole transcript is judged.

Here the recordings are checked line by line and filed per grid cell under
`results/<target>/recorded/` (source files, swapped in whole); a target with `continued:
true` in the config makes its conversations from them (rules/conversations.smk), through
the call store, the broker and the judges as any target's, so a stopped run resumes and a
repeated one pays nothing.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from kora.benchmarks.layout import RECORDED_MANIFEST, Layout
from kora.benchmarks.outcomes import Conversation
from kora.benchmarks.schemas import Scenario
from kora.benchmarks.taxonomy import Shard, Taxonomy
from kora.errors import InputError
from kora.run.ingest import parse_conversations, write_recorded


def stage_recordings(
    path: Path,
    taxonomy: Taxonomy,
    layout: Layout,
    *,
    target: str | None = None,
    risk_ids: list[str] | None = None,
    target_models: list[str] | None = None,
    limit_per_risk: int | None = None,
) -> dict[str, int]:
    """File the recordings to carry on; how many each target got.

    `risk_ids`, `target_models`: which records to take (by the risk and the model id they
    were recorded with); `limit_per_risk`: the first N of each risk by test key, an error
    when a risk has fewer (as canonical: a sample smaller than asked is not the sample).
    """
    for risk in risk_ids or []:
        if risk not in taxonomy.risks:
            raise InputError(f"--risk-ids: unknown risk id {risk!r}")
    if limit_per_risk is not None and limit_per_risk <= 0:
        raise InputError(f"--limit-per-risk must be a positive number (got {limit_per_risk})")

    def keep(model_id: str, scenario: Scenario) -> bool:
        return (risk_ids is None or scenario.riskId in risk_ids) and (
            target_models is None or model_id in target_models
        )

    filtering = risk_ids is not None or target_models is not None
    by_target = parse_conversations(
        path, taxonomy, target, whole_turns=True, keep=keep if filtering else None
    )
    if limit_per_risk is not None:
        by_target = {
            name: _first_per_risk(shards, limit_per_risk) for name, shards in by_target.items()
        }
    return write_recorded(
        path, by_target, taxonomy, layout, folder="recorded", manifest=RECORDED_MANIFEST
    )


def _first_per_risk(
    shards: dict[Shard, list[Conversation]], limit: int
) -> dict[Shard, list[Conversation]]:
    by_risk: dict[str, list[tuple[Shard, Conversation]]] = defaultdict(list)
    for shard, items in shards.items():
        by_risk[shard.risk_id].extend((shard, c) for c in items)
    out: dict[Shard, list[Conversation]] = defaultdict(list)
    for risk, pairs in sorted(by_risk.items()):
        if len(pairs) < limit:
            raise InputError(
                f"--limit-per-risk {limit}: risk {risk!r} has only {len(pairs)} recorded "
                "conversation(s)"
            )
        for shard, c in sorted(pairs, key=lambda p: p[1].key)[:limit]:
            out[shard].append(c)
    return out
