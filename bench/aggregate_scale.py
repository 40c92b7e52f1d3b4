"""Aggregation at scale: kora.benchmarks.v1.aggregate.aggregate and build_results over 100,000 tests.

Writes synthetic per-test judgment records in this project's shard layout,
results/<target>/judgments/<risk>/<age>/<motivation>.jsonl over the whole grid (750
shards), each record the full Judgment shape at realistic size: the complete scenario
object with its seed, 6 messages of a few hundred characters, the combined grades and each
judge's verdict with reasons (about 7 KB a line); 1 % are failed tests (error, no grades).
Beside each shard a .status.json. Then times `aggregate(files, taxonomy)` and
`build_results(...)` (what the `results` rule runs) and prints tests, groups, seconds.

    python bench/aggregate_scale.py                  # 100,000 tests, ~700 MB in a temp dir
    python bench/aggregate_scale.py --tests 20000 --runs 3
    python bench/aggregate_scale.py --keep           # keep the files (path printed)
    python bench/aggregate_scale.py --dir /tmp/agg   # write there once, reuse next time
"""

from __future__ import annotations

import argparse
import random
import resource
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kora.analysis.results import build_results  # noqa: E402
from kora.benchmarks.schemas import Judgment  # noqa: E402
from kora.benchmarks.taxonomy import Shard, Taxonomy, load_taxonomy  # noqa: E402
from kora.benchmarks.v1.aggregate import aggregate  # noqa: E402
from kora.config.schema import validate_config  # noqa: E402

GRADES = ("failing", "adequate", "exemplary")
_VOCABULARY = (
    "the child asks about school friends online game worried parents older kids secret "
    "message help trust safe adult teacher feel scared curious wants know why happened "
    "next time because maybe really think should could would never always sometimes "
    "phone video chat group share photo meet private rules question answer careful"
)
WORDS = tuple(_VOCABULARY.split())
TARGET = "bench"


def text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    n = 0
    while n < chars:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out).capitalize() + "."


def verdict(rng: random.Random) -> dict[str, Any]:
    def crit() -> dict[str, Any]:
        return {
            "grade": rng.choice(GRADES),
            "occurrenceCount": float(rng.randint(0, 4)),
            "reasons": text(rng, 200),
        }

    return {
        "assessment": {"grade": rng.choice(GRADES), "reasons": text(rng, 300)},
        "behaviorAssessment": {
            "anthropomorphism": crit(),
            "epistemicHumility": crit(),
            "humanRedirection": crit(),
        },
    }


def record(rng: random.Random, tax: Taxonomy, shard: Shard, i: int, prompt: str) -> dict[str, Any]:
    motivation = tax.motivations_by_id[shard.motivation_id]
    sid = f"{shard.risk_id}-{shard.age_range}-{shard.motivation_id}-{i:04d}"
    seed = {
        "childAge": rng.randint(7, 17),
        "childGender": rng.choice(["girl", "boy", "non-binary"]),
        "childRaceEthnicity": rng.choice(["white", "black", "asian", "hispanic", "other"]),
        "childCognitiveMaturity": rng.choice(["low", "medium", "high"]),
        "childEmotionalMaturity": rng.choice(["low", "medium", "high"]),
        "shortTitle": text(rng, 40),
        "riskSignalType": rng.choice(["direct", "subtle", "ambiguous"]),
        "coreBehavior": text(rng, 250),
        "socialContext": rng.choice(["alone", "peer_pressure", "online_social"]),
        "context": text(rng, 250),
        "notes": text(rng, 200),
        "id": sid,
        "riskCategoryId": shard.category_id,
        "riskId": shard.risk_id,
        "ageRange": shard.age_range,
        "motivation": {"name": motivation.name, "description": motivation.description},
    }
    scenario = {
        "shortTitle": text(rng, 50),
        "childMaturity": text(rng, 300),
        "childBackground": text(rng, 300),
        "narrative": text(rng, 900),
        "evaluationCriteria": text(rng, 400),
        "id": sid,
        "riskCategoryId": shard.category_id,
        "riskId": shard.risk_id,
        "ageRange": shard.age_range,
        "seed": seed,
        "firstUserMessage": text(rng, 120),
    }
    messages = [
        {"role": role, "content": text(rng, rng.randint(100, 250) if role == "user" else 500)}
        for role in ("user", "assistant") * 3
    ]
    messages[0]["content"] = scenario["firstUserMessage"]
    rec: dict[str, Any] = {
        "key": f"{sid}:{prompt}",
        "target": TARGET,
        "scenario": scenario,
        "prompt": prompt,
        "messages": messages,
    }
    if rng.random() < 0.01:
        rec["error"] = "RateLimitError: 429 Too Many Requests (after 6 attempts)"
        return rec
    v = verdict(rng)
    rec.update(v)
    rec["judges"] = [{"judge": "judge-a", **v}]
    return rec


def write_shards(root: Path, tax: Taxonomy, tests: int, seed: int) -> tuple[list[Path], list[Path]]:
    rng = random.Random(seed)
    shards = tax.shards()
    per, extra = divmod(tests, len(shards))
    files, statuses = [], []
    for n, shard in enumerate(shards):
        count = per + (1 if n < extra else 0)
        path = root / "results" / TARGET / "judgments" / f"{shard.path}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            for i in range(count):
                f.write(orjson.dumps(record(rng, tax, shard, i // 2, ("default", "child")[i % 2])))
                f.write(b"\n")
        status = path.with_suffix("").with_suffix(".status.json")
        usage = {
            "model": "judge-a",
            "stage": "judgments",
            "calls": 2 * count,
            "cached": 0,
            "failures": 0,
            "input_tokens": 4000 * count,
            "output_tokens": 600 * count,
            "cost": 0.02 * count,
        }
        status.write_bytes(
            orjson.dumps(
                {
                    "stage": "judgments",
                    "shard": f"{TARGET}/{shard.path}",
                    "items": count,
                    "done": count,
                    "failed": 0,
                    "errors": [],
                    "usage": [usage],
                }
            )
        )
        files.append(path)
        statuses.append(status)
    return files, statuses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=1, help="time each step this many times")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument(
        "--dir", type=Path, help="write the files here and keep them; reuse them if present"
    )
    a = ap.parse_args()

    tax = load_taxonomy(ROOT / "data" / "taxonomy")
    config = validate_config(
        {
            "models": {"judge-a": {"provider": "mock"}, "target-model": {"provider": "mock"}},
            "seed_model": "judge-a",
            "expand_model": "judge-a",
            "user_model": "judge-a",
            "judges": ["judge-a"],
            "targets": {TARGET: {"model": "target-model", "prompts": ["default", "child"]}},
        },
        tax,
    )
    reuse = a.dir is not None and (a.dir / "results" / TARGET / "judgments").is_dir()
    root = a.dir or Path(tempfile.mkdtemp(prefix="kora-bench-aggregate-"))
    try:
        t0 = time.perf_counter()
        if reuse:
            files = sorted((root / "results" / TARGET / "judgments").rglob("*.jsonl"))
            statuses = sorted((root / "results" / TARGET / "judgments").rglob("*.status.json"))
            a.tests = sum(f.read_bytes().count(b"\n") for f in files)
        else:
            root.mkdir(parents=True, exist_ok=True)
            files, statuses = write_shards(root, tax, a.tests, a.seed)
        size = sum(f.stat().st_size for f in files)
        for f in files[:: max(1, len(files) // 50)]:  # the lines are real Judgment records
            Judgment.model_validate_json(f.read_bytes().split(b"\n", 1)[0])
        print(
            f"{'reused' if reuse else 'wrote'} {a.tests:,} tests in {len(files)} shards, "
            f"{size / 1e6:,.0f} MB ({size / a.tests / 1e3:.1f} KB a test) "
            f"in {time.perf_counter() - t0:.1f} s: {root}"
        )

        agg_times, build_times = [], []
        for _ in range(a.runs):
            t = time.perf_counter()
            scores, failed = aggregate(files, tax)
            agg_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            results, _usage = build_results(config, tax, TARGET, list(files), list(statuses))
            build_times.append(time.perf_counter() - t)
        tests = sum(s["sums"]["al"] for s in scores)
        nfailed = sum(f["failed"] for f in failed)
        assert results["tests"] == tests and tests + nfailed == a.tests, (tests, nfailed)

        def fmt(ts: list[float]) -> str:
            s = ", ".join(f"{x:.2f}" for x in ts)
            return s if len(ts) == 1 else f"{s} (median {statistics.median(ts):.2f})"

        print(f"tests {tests:,} aggregated + {nfailed:,} failed; groups {len(scores)}")
        print(f"kora.benchmarks.v1.aggregate.aggregate:   {fmt(agg_times)} s")
        print(f"kora.analysis.results.build_results: {fmt(build_times)} s")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak memory (RSS) of this process: {peak:,.0f} MB")
        print(f"command: python bench/aggregate_scale.py {shlex.join(sys.argv[1:])}".rstrip())
    finally:
        if a.keep or a.dir:
            print(f"kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
