"""The bill against a server that counts what it serves, on the real command.

Every role and the target on a loopback Anthropic Messages API server (in a thread of this
process) that counts each answer it serves and its tokens. In three fresh copies of the
workflow, the real command (`snakemake --cores 10 results/bench-target/results.json
--configfile bench.yaml`) runs:

1. without a stop;
2. stopped with SIGINT to Snakemake alone once the server has served 40 % of run 1's
   calls, then the same command again;
3. in run 1's folder, its results, shards and call store removed (its bill kept, as after
   a pilot), with `budget: {usd: B}`, B half of `kora plan`'s estimate for the run (its
   tokens per call learnt from that bill), then the command the stopped run prints to go
   on with a higher budget.

Printed, for each: what the server served, what `kora usage` says was billed, usage.json's
`result` and `paidThisRun`, the last progress line's paid figures, and for run 3 the
budget, what was spent, and the gap to the budget.

    python bench/bill.py                  # 4 risks x 2 ages x 2 motivations x 3 seeds
    python bench/bill.py --risks 2 --latency 0.5

With `--estimates` (issue 58), the estimates against the bill instead, in a fresh copy each:
the demo (config/demo.yaml, the mock at $3 / $15 a million tokens), the grid (the same with
every risk: 100 cells, 5,268 calls) and the demo's grid on the counting server (every model
a paid one, the plan at its typical lengths). For each: `kora plan`'s expected and worst
case, the projection of the run's total the progress line gives when a tenth of the paid
calls are in (kora.run.plan.still_to_pay over the bill's first tenth, in the order the
answers arrived, with the plan the run's start makes; and for the server run, whose lines
come often enough, the run's own line nearest after a tenth), and the final bill.

    python bench/bill.py --estimates
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
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

from kora.llm.money.bill import bill_dir, charges, total  # noqa: E402
from kora.llm.money.budget import counting_since  # noqa: E402
from tests.helpers import copy_workflow  # noqa: E402
from tests.workflows import Server, config, structured_answer  # noqa: E402

RISKS = ["violence_and_physical_harm", "sycophancy", "grooming_and_manipulation", "cybersecurity"]
KINDS = ("calls", "input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
COMMAND = ["--cores", "10", "results/bench-target/results.json", "--configfile", "bench.yaml"]


def workspace(root: Path, name: str, args: argparse.Namespace, **more: Any) -> tuple[Path, Server]:
    server = Server(structured=structured_answer, latency=args.latency)
    server.start()
    d = root / name
    d.mkdir()
    copy_workflow(d)
    cfg = config(server.url, ["bench-target"], ["judge"])
    cfg.pop("prompts_dir")
    cfg["targets"]["gpt-target"] = None
    cfg["grid"] = {
        "risks": RISKS[: args.risks],
        "age_ranges": ["7to9", "13to17"],
        "motivations": ["curiosity_exploration", "emotional_distress_anxiety"],
        "seeds_per_task": args.seeds,
    }
    for m in cfg["models"].values():
        # no prompt cache: two runs' results then cost the same to the token whatever
        # order their calls came in (the tests cover the cache's counts)
        m.update(price={"input": 3.0, "output": 15.0}, max_tokens=1000, prompt_cache=False)
    cfg.update(more)
    (d / "bench.yaml").write_text(yaml.safe_dump(cfg))
    return d, server


def workspace_server(d: Path, args: argparse.Namespace) -> Server:
    """A fresh counting server for an existing workspace: its models pointed at it."""
    server = Server(structured=structured_answer, latency=args.latency)
    server.start()
    cfg = yaml.safe_load((d / "bench.yaml").read_text())
    for m in cfg["models"].values():
        m["base_url"] = server.url
    (d / "bench.yaml").write_text(yaml.safe_dump(cfg))
    return server


def env() -> dict[str, str]:
    return dict(os.environ, ANTHROPIC_API_KEY="bench-key", PYTHONUNBUFFERED="1")


def run(d: Path, words: list[str], log: str) -> int:
    with (d / log).open("w") as out:
        return subprocess.run(
            words, cwd=d, env=env(), stdout=out, stderr=subprocess.STDOUT, timeout=3600
        ).returncode


def billed(d: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "kora.commands.main", "usage", "--json"],
        cwd=d, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return dict(orjson.loads(out)["billed"])


def served(server: Server) -> dict[str, int]:
    with server.lock:
        return {k: server.served[k] for k in KINDS}


def last_paid(text: str) -> str:
    found = re.findall(r"^\[kora\] .*?(paid \$[\d.]+ for [\d,]+ calls \([\d,]+ tokens in, [\d,]+ out\))", text, re.M)  # fmt: skip
    return found[-1] if found else "(none)"


def usage(d: Path) -> dict[str, Any]:
    path = d / "results/bench-target/usage.json"
    return dict(orjson.loads(path.read_bytes())) if path.exists() else {}


def brief(c: dict[str, Any]) -> str:
    if not c:
        return "-"
    cost = f", ${c['cost']:.4f}" if "cost" in c else ""
    return f"{c['calls']:,} calls, {c['input_tokens']:,} in, {c['output_tokens']:,} out{cost}"


def estimate_case(d: Path, cfg: dict[str, Any], env: dict[str, str]) -> list[str]:
    """One row of `--estimates`: the run of mock-target in `d` with `cfg` as run.yaml."""
    import asyncio

    from kora.run.plan import estimate, plan_calls, still_to_pay
    from kora.run.workflow.pipeline import Pipeline

    d.mkdir()
    copy_workflow(d)
    (d / "run.yaml").write_text(yaml.safe_dump(cfg))
    main_ = [sys.executable, "-m", "kora.commands.main"]
    plan = subprocess.run([*main_, "plan", "mock-target", "--configfile", "run.yaml"],
                          cwd=d, env=env, capture_output=True, text=True, check=True).stdout  # fmt: skip
    expected, worst = re.findall(r"^total .* \$([\d,.]+)\*? +\$([\d,.]+)\*?$", plan, re.M)[-1]
    here = Path.cwd()
    os.chdir(d)  # the plan the run's start makes, for the replay of its line
    try:
        pipeline = Pipeline.load(["run.yaml"], ".")
        report = asyncio.run(plan_calls(pipeline, ["mock-target"]))
        shares = estimate(pipeline.config, report, ["mock-target"], Path("."), pipeline.benchmark)
    finally:
        os.chdir(here)
    started = time.monotonic()
    words = [*SNAKEMAKE, "--cores", "10", "results/mock-target/results.json", "--configfile", "run.yaml"]  # fmt: skip
    with (d / "run.log").open("w") as out:
        status = subprocess.run(
            words, cwd=d, env=env, stdout=out, stderr=subprocess.STDOUT
        ).returncode
    took = time.monotonic() - started
    bill = sorted(charges(bill_dir(d / ".kora/cache")), key=lambda c: c.t)
    final = sum(c.counts.cost for c in bill)
    tenth = bill[: -(-len(bill) // 10)]
    by_kind: dict[str, Any] = {}
    for c in tenth:
        by_kind[c.stage] = by_kind[c.stage] + c.counts if c.stage in by_kind else c.counts
    projected = sum(c.counts.cost for c in tenth) + still_to_pay(shares, "usd", by_kind)[0]
    printed = "-"
    line = re.compile(r"paid \$[\d.]+ for ([\d,]+) calls .*?about \$([\d,.]+) by the run's end")
    for m in line.finditer((d / "run.log").read_text()):
        if int(m.group(1).replace(",", "")) >= len(bill) / 10:
            printed = f"${m.group(2)} at {m.group(1)} calls ({_ratio(m.group(2), final)})"
            break
    exp = float(expected.replace(",", ""))
    return [f"{len(bill):,}", f"${exp:,.2f} ({_ratio(expected, final)})", f"${worst}",
            f"${projected:,.2f} ({projected / final:.2f} x)", printed, f"${final:,.4f}",
            f"{status}, {took:.0f} s"]  # fmt: skip


def _ratio(figure: str, final: float) -> str:
    return f"{float(figure.replace(',', '')) / final:.2f} x"


def estimates(args: argparse.Namespace) -> None:
    price = {"input": 3.0, "output": 15.0}
    demo = yaml.safe_load((ROOT / "config/demo.yaml").read_text())
    demo["models"] = {"mock": {"provider": "mock", "price": price}}
    rows: list[tuple[str, list[str]]] = []
    with tempfile.TemporaryDirectory(prefix="kora-estimates-") as tmp:
        root = Path(tmp)
        rows.append(("demo, mock", estimate_case(root / "demo", demo, env())))
        grid = {**demo, "grid": {**demo["grid"], "risks": "all"}}
        rows.append(("grid (every risk), mock", estimate_case(root / "grid", grid, env())))
        with Server(structured=structured_answer, latency=args.latency) as server:
            cfg = config(server.url, ["mock-target"], ["judge"])
            cfg.pop("prompts_dir")
            cfg.update(grid=demo["grid"], targets={**cfg["targets"], "gpt-target": None})
            for m in cfg["models"].values():
                m.update(price=price, max_tokens=1000, prompt_cache=False)
            rows.append(("demo, counting server", estimate_case(root / "server", cfg, env())))
    print("| run | paid calls | plan: expected | plan: worst case | projected at a tenth "
          "(replayed) | projected at a tenth (its line) | bill | exit, wall |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name, cells in rows:
        print(f"| {name} | {' | '.join(cells)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--risks", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--estimates", action="store_true", help="the estimates against the bill")
    args = ap.parse_args()
    if args.estimates:
        return estimates(args)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="kora-bill-") as tmp:
        root = Path(tmp)
        # 1. without a stop
        d, server = workspace(root, "whole", args)
        started = time.monotonic()
        status = run(d, [*SNAKEMAKE, *COMMAND], "run.log")
        took = time.monotonic() - started
        whole = usage(d)
        rows += [
            ("1. exit status, wall", f"{status}, {took:.1f} s"),
            ("1. served by the server", brief(served(server))),
            ("1. billed (`kora usage`)", brief(billed(d))),
            ("1. bill == served", str({k: billed(d)[k] for k in KINDS} == served(server))),
            ("1. usage.json result", brief(whole.get("result", {}))),
            ("1. usage.json paidThisRun", brief(whole.get("paidThisRun", {}))),
            ("1. last progress line", last_paid((d / "run.log").read_text())),
        ]
        server.stop()

        # 2. SIGINT to Snakemake alone at 40 %, then the same command
        d, server = workspace(root, "stopped", args)
        at = int(0.4 * whole["result"]["calls"])
        with (d / "run1.log").open("w") as out:
            proc = subprocess.Popen(
                [*SNAKEMAKE, *COMMAND], cwd=d, env=env(), stdout=out, stderr=subprocess.STDOUT
            )
            server.wait_for(lambda _: server.served["calls"] >= at, 3600)
            proc.send_signal(signal.SIGINT)
            stop_status = proc.wait(timeout=600)
        first = (d / "run1.log").read_text()
        after_stop = dict(billed(d))
        status = run(d, [*SNAKEMAKE, *COMMAND], "run2.log")
        resumed = usage(d)
        rows += [
            ("2. stopped at (served calls)", f"{at} of {whole['result']['calls']}"),
            ("2. stop: exit status, traceback", f"{stop_status}, {'Traceback' in first}"),
            ("2. stop: its last lines", " / ".join(first.strip().splitlines()[-3:])[:300]),
            ("2. billed after the stop", brief(after_stop)),
            ("2. resume exit status", str(status)),
            ("2. served, both runs", brief(served(server))),
            ("2. billed, both runs", brief(billed(d))),
            ("2. bill == served", str({k: billed(d)[k] for k in KINDS} == served(server))),
            ("2. usage.json result", brief(resumed.get("result", {}))),
            ("2. result == run 1's", str(resumed.get("result") == whole.get("result"))),
            ("2. usage.json paidThisRun", brief(resumed.get("paidThisRun", {}))),
            ("2. last progress line (resume)", last_paid((d / "run2.log").read_text())),
        ]
        server.stop()

        # 3. a budget of half the plan's estimate, in run 1's folder cleared but for its bill
        d = root / "whole"
        for gone in ("results", "data/seeds", "data/scenarios", ".kora/cache", ".snakemake"):
            shutil.rmtree(d / gone, ignore_errors=True)
        server = workspace_server(d, args)
        plan = subprocess.run(
            [sys.executable, "-m", "kora.commands.main", "plan", "bench-target",
             "--configfile", "bench.yaml"],
            cwd=d, env=env(), capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        # the total row's expected figure (the worst case follows it)
        expected = re.findall(r"^total .* \$([\d,.]+) +\$[\d,.]+$", plan, re.M)[-1]
        estimate = float(expected.replace(",", ""))
        budget = round(estimate / 2, 4)
        cfg = yaml.safe_load((d / "bench.yaml").read_text())
        cfg["budget"] = {"usd": budget}
        (d / "bench.yaml").write_text(yaml.safe_dump(cfg))
        status = run(d, [*SNAKEMAKE, *COMMAND], "run3.log")
        text = (d / "run3.log").read_text()
        # what counts against the budget: the bill from the first run with one (run 3)
        since = counting_since(d / ".kora/cache", start=False)
        spent = since_then(d, since)
        said = re.search(r"raise the budget: (.*)$", text, re.M)
        rows += [
            ("3. plan's estimate, budget", f"${estimate:.4f}, ${budget:.4f}"),
            ("3. exit status, results.json written", f"{status}, {bool(usage(d))}"),
            ("3. spent, gap to the budget", f"${spent.cost:.4f}, ${budget - spent.cost:.4f}"),
            ("3. largest call billed", f"${max_call(d, since):.4f}"),
            ("3. its last lines", " / ".join(text.strip().splitlines()[-4:])[:400]),
        ]
        if said:
            words = shlex.split(said.group(1))
            status = run(d, [*SNAKEMAKE, *words[1:]], "run4.log")
            after = since_then(d, since)
            rows += [
                ("3. go on: exit status", str(status)),
                ("3. bill == served", str({k: getattr(after, k) for k in KINDS} == served(server))),
                ("3. usage.json result", brief(usage(d).get("result", {}))),
            ]
        server.stop()
    print("| what | figure |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


def since_then(d: Path, since: float) -> Any:
    """The workspace's bill from `since` on (kora.llm.money.usage.Counts)."""
    return total(bill_dir(d / ".kora/cache"), since=since)


def max_call(d: Path, since: float) -> float:
    lines = charges(bill_dir(d / ".kora/cache"), since=since)
    return max((c.counts.cost for c in lines), default=0.0)


if __name__ == "__main__":
    main()
