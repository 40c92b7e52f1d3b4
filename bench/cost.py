"""The bill of the same run: plain, with the provider's prompt cache, in batches, both.

The real command (`snakemake --cores 10 results/bench-target/results.json`) runs twice on
the same grid slice from a cold start, every role and the target on one loopback
Anthropic server (tests/loopback.py) that keeps a prompt cache as the API does (prefixes
up to a `cache_control` marker of 1,024 tokens or more; a later prompt starting with one
reads it) and answers deterministically from the request without its markers, so both
runs get the same answers. The model's price is $3 / $15 per million input / output
tokens; cache writes cost 1.25x the input price and reads 0.1x (kora.llm.registry).
Printed: tests, cost per test from usage.json, the ratio to the plain run, the cache's
tokens, and whether the two results.json files are identical.

    python bench/cost.py                     # 1 risk x 3 ages x 4 motivations x 4 seeds
    python bench/cost.py --motivations 10 --seeds 8

Four runs: plain, prompt caching, batch mode (`batch: true`: Message Batches at half
price; the loopback batches end `--batch-latency` seconds after they are sent), both.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.workflow import answer, bench_config, copy_workflow  # noqa: E402

PRICE = {"input": 3.0, "output": 15.0}


def _unmarked(body: Any) -> Any:
    """The request without prompt-cache markers (blocks back to plain strings)."""
    body = dict(body)
    system = body.get("system")
    if isinstance(system, list):
        body["system"] = "".join(b.get("text", "") for b in system)
    body["messages"] = [
        {**m, "content": "".join(b.get("text", "") for b in m["content"])}
        if isinstance(m["content"], list)
        else m
        for m in body["messages"]
    ]
    return body


def serve(port_q: Any, stop: Any, batch_latency: float) -> None:
    from tests.loopback import AnthropicServer

    class Server(AnthropicServer):
        def _next_answer(self, rec: Any, *, structured: bool, invalid: bool) -> Any:
            body = _unmarked(rec.body)
            if not structured:
                n = len(body.get("messages", []))
                # the prompt alone: a batch's params and a direct request differ in
                # fields that do not change the question
                prompt = {k: body.get(k) for k in ("system", "messages", "max_tokens")}
                tag = hashlib.sha256(orjson.dumps(prompt)).hexdigest()[:10]
                return f"line {n} ({tag}): ok, but why would that be? tell me more please"
            rec.body = body  # `answer` seeds its randomness from the messages
            return answer(rec)

    server = Server(structured=answer, record=False)
    server.batch_latency = batch_latency
    server.start()
    port_q.put(server.port)
    stop.wait()
    server.stop()


def run_once(url: str, args: argparse.Namespace, caching: bool, batch: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kora-bench-cost-") as tmp:
        work = Path(tmp)
        copy_workflow(work)
        cfg = bench_config(url, args.motivations, args.seeds)
        cfg["models"]["bench"].update(price=PRICE, prompt_cache=caching, batch=batch)
        (work / "bench.yaml").write_text(yaml.safe_dump(cfg))
        cmd = [sys.executable, "-m", "snakemake", "--cores", "10",
               "results/bench-target/results.json", "--configfile", "bench.yaml"]  # fmt: skip
        env = dict(os.environ, ANTHROPIC_API_KEY="sk-loopback", KORA_BATCH_POLL="0.5")
        started = time.monotonic()
        done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"snakemake failed ({done.returncode})")
        results = (work / "results/bench-target/results.json").read_bytes()
        usage = orjson.loads((work / "results/bench-target/usage.json").read_bytes())
        doc = orjson.loads(results)
        scores = orjson.dumps(doc["scores"])
        return {"tests": doc["tests"], "total": usage["total"], "scores": scores, "wall": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--motivations", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--batch-latency", type=float, default=5.0, help="seconds a batch takes")
    ap.add_argument(
        "--modes", nargs="*", help="only these besides plain: 'prompt caching', batch, both"
    )
    args = ap.parse_args()
    ctx = multiprocessing.get_context("spawn")
    rows = {}
    modes = {
        "plain": (False, False),
        "prompt caching": (True, False),
        "batch": (False, True),
        "both": (True, True),
    }
    for name, (caching, batch) in modes.items():
        if args.modes and name not in args.modes and name != "plain":
            continue
        # each run against a fresh server: its own prompt cache and batches
        port_q, stop = ctx.Queue(), ctx.Event()
        server = ctx.Process(target=serve, args=(port_q, stop, args.batch_latency))
        server.start()
        try:
            url = f"http://127.0.0.1:{port_q.get(timeout=60)}"
            rows[name] = run_once(url, args, caching, batch)
        finally:
            stop.set()
            server.join(30)
    plain = rows["plain"]["total"]["cost"]
    print(f"grid: 1 risk x 3 age ranges x {args.motivations} motivations x {args.seeds} "
          "seeds; price $3 / $15 per million input / output tokens")  # fmt: skip
    for name, r in rows.items():
        t = r["total"]
        print(
            f"  {name:<15} tests {r['tests']:4d}  cost ${t['cost']:.4f} = "
            f"${t['cost'] / max(r['tests'], 1):.5f} a test  ratio {t['cost'] / plain:.3f}  "
            f"(input {t['input_tokens']:,}, cache written {t.get('cache_write_tokens', 0):,}, "
            f"read {t.get('cache_read_tokens', 0):,})"
        )
    same = all(r["scores"] == rows["plain"]["scores"] for r in rows.values())
    print(f"  results.json scores identical in all {len(rows)}: {same}")
    print("  wall: " + ", ".join(f"{k} {r['wall']:.0f} s" for k, r in rows.items())
          + f" (batches end {args.batch_latency:g} s after they are sent)")  # fmt: skip
    print("reproduce: python bench/cost.py " + shlex.join(sys.argv[1:]))


if __name__ == "__main__":
    main()
