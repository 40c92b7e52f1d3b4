"""The power `kora plan --detect` promises, against simulated runs (1,000 each).

    python bench/power.py

For each design of tests/test_sizing.py (difference to detect, discordance, cells the
gate adjusts over, paired tests a seed): the seeds `detect` asks for, the paired tests
that gives, the power it promises, and the share of 1,000 simulated runs in which the
exact McNemar test at the adjusted level finds the difference. Last, how often the Holm
gate over the demo grid's 13 cells fires at the seeds asked for it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.test_sizing as designs
from kora.analysis.stats.sizing import detect
from tests.simulated import simulate_mcnemar_power


def main() -> None:
    print("| delta | discordance | cells | pairs/seed | seeds asked | pairs | promised power "
          "| simulated (1,000 runs) |")  # fmt: skip
    for delta, psi, cells, per in designs.DESIGNS:
        d = detect(delta, psi, pairs_per_seed=per, unit="seeds_per_task", cells=cells)
        seed = int(1000 * delta + 10 * cells + per)
        s = simulate_mcnemar_power(d.pairs, delta, psi, d.level, runs=1000, seed=seed)
        print(f"| {delta} | {psi} | {cells} | {per} | {d.seeds} | {d.pairs} | {d.power:.3f} "
              f"| {s:.3f} |")  # fmt: skip
    d = detect(0.05, 0.198, pairs_per_seed=32, unit="seeds_per_task", cells=13)
    gate = designs._holm_gate_power(d.seeds, 0.05, 0.198, 1000, seed=28)
    print(f"demo grid: the Holm gate over 13 cells fires in {gate:.3f} of 1,000 runs")


if __name__ == "__main__":
    main()
