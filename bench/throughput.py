"""Throughput of the run-wide limiter against a rate-limited loopback provider.

A loopback server (its own process) accepts at most `--limit` requests per second
(sliding one-second window; above it: 429 with Retry-After) and answers each accepted
request after `--latency` seconds. `--workers` processes, as `snakemake --cores N` would
run N jobs, each make calls with `--concurrency` tasks through `ModelClient` (cache off,
real retry waits), sharing one limiter `state_dir`. Printed: the limit, the steady
throughput (ramp-up excluded), its ratio to the limit and the share of 429s.

    python bench/throughput.py                    # both modes, about 100 s
    python bench/throughput.py --mode configured  # requests_per_minute = the limit
    python bench/throughput.py --mode adaptive    # no configured limit: learn from 429s
    python bench/throughput.py --mode off         # baseline: no limiter, retries only

With `--bind tokens` the server also limits input tokens (`--token-limit` a second, 1 s
of burst; above it: 429) and the prompts are judge-sized (`--prompt-tokens`), so the token
limit binds before the request limit. Printed: the steady input tokens a second as a share
of the token limit, and the 429 share, for three modes: `configured`
(`input_tokens_per_minute`, or `tokens_per_minute` for `--provider openai`; the server
sends no rate-limit headers), `headers` (no configured limit; the server sends its
rate-limit headers) and `neither` (no configured limit, no headers: 429s only).

    python bench/throughput.py --bind tokens --provider anthropic   # three modes, ~5 min
"""

from __future__ import annotations

import argparse
import multiprocessing
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench.harness, and tests.loopback behind it

from bench.harness import client_process, server_process  # noqa: E402
from kora.llm.limits import RateState  # noqa: E402


def run_mode(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    port_q, stats_q, results = ctx.Queue(), ctx.Queue(), ctx.Queue()
    stop = ctx.Event()
    server_kw: dict[str, Any] = {"rate_limit": args.limit, "latency": args.latency}
    client_kw: dict[str, Any] = {}
    if args.bind == "tokens":
        per_minute = args.token_limit * 60
        server_kw.update(tokens_per_minute=per_minute, limit_headers=mode == "headers")
        key = "input_tokens_per_minute" if args.provider == "anthropic" else "tokens_per_minute"
        client_kw.update(
            prompt_chars=args.prompt_tokens * 4,
            limits={key: per_minute} if mode == "configured" else None,
        )
    server = ctx.Process(
        target=server_process, args=(args.provider, port_q, stats_q, stop), kwargs=server_kw
    )
    server.start()
    workers: list[Any] = []
    rates: list[tuple[float, float, float]] = []
    try:
        port = port_q.get(timeout=60)
        base_url = f"http://127.0.0.1:{port}" + ("/v1" if args.provider == "openai" else "")
        ready = ctx.Barrier(args.workers + 1)
        with tempfile.TemporaryDirectory(prefix="kora-bench-") as state_dir:
            workers = [
                ctx.Process(
                    target=client_process,
                    args=(args.provider, base_url, state_dir, 10**9, args.concurrency, results),
                    kwargs={
                        **client_kw,
                        "requests_per_minute": args.limit * 60
                        if mode == "configured" and args.bind == "requests"
                        else None,
                        "adaptive": mode != "off",
                        "testing": False,
                        "ready": ready,
                        "duration": args.duration,
                    },
                )
                for _ in range(args.workers)
            ]
            for w in workers:
                w.start()
            ready.wait(timeout=300)  # every worker has imported and set up its client
            start_at = time.time()
            deadline = start_at + args.duration
            if args.trace:  # sample the shared limiter state
                while time.time() < deadline + 2:
                    for rate_file in Path(state_dir).glob("*.rate"):
                        st = RateState.unpack(rate_file.read_bytes())
                        if st is not None:
                            rates.append((time.time(), st.rate, st.cuts))
                    time.sleep(0.1)
            out = [results.get(timeout=args.duration + 300) for _ in workers]
            for w in workers:
                w.join(30)
        stop.set()
        stats = stats_q.get(timeout=60)
        server.join(30)
    finally:
        stop.set()
        for p in [*workers, server]:
            if p.is_alive():
                p.terminate()

    accepted = sorted(stats["accepted_times"])
    refused = sorted(stats["refused_times"])
    lo, hi = start_at + args.warmup, deadline
    steady = sum(1 for t in accepted if lo <= t < hi) / (hi - lo)
    refused_steady = sum(1 for t in refused if lo <= t < hi)
    accepted_steady = sum(1 for t in accepted if lo <= t < hi)
    if args.trace:
        t0 = int(start_at)
        for sec in range(int(args.duration) + 3):
            a = sum(1 for t in accepted if t0 + sec <= t < t0 + sec + 1)
            f = sum(1 for t in refused if t0 + sec <= t < t0 + sec + 1)
            rs = [(r, c) for t, r, c in rates if t0 + sec <= t < t0 + sec + 1]
            shown = " ".join(f"{r:.0f}" for r, _ in rs[::2])
            cuts = int(rs[-1][1]) if rs else 0
            print(f"  t={sec:3d}s accepted {a:3d} refused {f:3d}  cuts {cuts:3d} rate/s {shown}")
    done = sum(r["done"] for r in out)
    tokens_per_call = sum(r["input_tokens"] for r in out) / max(1, done)
    return {
        "mode": mode,
        "tokens_per_call": tokens_per_call,
        "token_ratio": steady * tokens_per_call / args.token_limit,
        "steady": steady,
        "ratio": steady / args.limit,
        "refused_pct": 100.0 * len(refused) / max(1, len(refused) + len(accepted)),
        "refused_steady_pct": 100.0 * refused_steady / max(1, refused_steady + accepted_steady),
        "accepted": len(accepted),
        "refused": len(refused),
        "done": done,
        "errors": sum(len(r["errors"]) for r in out),
        "rate": max((r["rate"] or 0.0) for r in out),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--mode",
        choices=["configured", "adaptive", "both", "off", "headers", "neither"],
        default="both",
        help="off: no limiter at all (a baseline: only the retry layer's back-off)",
    )
    ap.add_argument("--provider", choices=["openai", "anthropic"], default="openai")
    ap.add_argument("--limit", type=float, default=40.0, help="server limit, requests/s")
    ap.add_argument("--latency", type=float, default=1.5, help="seconds per accepted call")
    ap.add_argument("--workers", type=int, default=10, help="client processes (jobs)")
    ap.add_argument("--concurrency", type=int, default=16, help="calls in flight per worker")
    ap.add_argument("--duration", type=float, default=35.0, help="seconds of calls")
    ap.add_argument("--warmup", type=float, default=8.0, help="ramp-up left out, seconds")
    ap.add_argument("--trace", action="store_true", help="print accepted/refused per second")
    ap.add_argument(
        "--bind",
        choices=["requests", "tokens"],
        default="requests",
        help="tokens: an input-token limit that binds before the request limit",
    )
    ap.add_argument("--token-limit", type=float, default=40_000.0, help="input tokens/s")
    ap.add_argument("--prompt-tokens", type=int, default=3000, help="tokens a prompt")
    args = ap.parse_args()
    if args.bind == "tokens":
        print_tokens(args)
        return

    command = " ".join(["python", "bench/throughput.py", *map(shlex.quote, sys.argv[1:])])
    print(f"command: {command}")
    print(
        f"server: {args.limit:g} requests/s (429 + Retry-After above), {args.latency:g} s "
        f"latency; {args.workers} worker processes x {args.concurrency} concurrent calls, "
        f"provider {args.provider}, {args.duration:g} s of calls, first {args.warmup:g} s "
        "left out"
    )
    modes = ["configured", "adaptive"] if args.mode == "both" else [args.mode]
    for mode in modes:
        r = run_mode(args, mode)
        limit = {
            "configured": f"requests_per_minute={args.limit * 60:g}",
            "adaptive": "none (adaptive)",
            "off": "none (limiter off)",
        }[mode]
        print(
            f"[{mode}] configured limit: {limit}; steady throughput {r['steady']:.1f} req/s = "
            f"{100 * r['ratio']:.1f} % of the server's {args.limit:g} req/s; "
            f"429s {r['refused_pct']:.1f} % of all requests ({r['refused']} of "
            f"{r['refused'] + r['accepted']}; {r['refused_steady_pct']:.1f} % in the steady "
            f"window); calls done {r['done']}, failed {r['errors']}; "
            f"final shared rate {r['rate'] * 60:.0f}/min"
        )


def print_tokens(args: argparse.Namespace) -> None:
    command = " ".join(["python", "bench/throughput.py", *map(shlex.quote, sys.argv[1:])])
    print(f"command: {command}")
    print(
        f"server: {args.token_limit:g} input tokens/s (1 s burst) and {args.limit:g} "
        f"requests/s (429 + Retry-After above either), {args.latency:g} s latency; prompts of "
        f"~{args.prompt_tokens} tokens; {args.workers} worker processes x {args.concurrency} "
        f"concurrent calls, provider {args.provider}, {args.duration:g} s of calls, first "
        f"{args.warmup:g} s left out"
    )
    modes = ["configured", "headers", "neither"] if args.mode == "both" else [args.mode]
    key = "input_tokens_per_minute" if args.provider == "anthropic" else "tokens_per_minute"
    for mode in modes:
        r = run_mode(args, mode)
        limit = {
            "configured": f"{key}={args.token_limit * 60:g}, no headers",
            "headers": "none; the server sends rate-limit headers",
            "neither": "none, no headers (429s only)",
        }.get(mode, mode)
        print(
            f"[{mode}] configured limit: {limit}; steady {r['steady']:.1f} req/s x "
            f"{r['tokens_per_call']:.0f} tokens = {100 * r['token_ratio']:.1f} % of the "
            f"server's {args.token_limit:g} input tokens/s; 429s {r['refused_pct']:.1f} % of "
            f"all requests ({r['refused']} of {r['refused'] + r['accepted']}; "
            f"{r['refused_steady_pct']:.1f} % in the steady window); calls done {r['done']}, "
            f"failed {r['errors']}"
        )


if __name__ == "__main__":
    main()
