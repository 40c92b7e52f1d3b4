"""Time report.html + summary.json for a large run (the `report` rule's work).

    python bench/report_scale.py                 # 6,000 tests, 3 runs
    python bench/report_scale.py --copies 500    # 20,000 tests

The tests come from the report tests' fixture run (tests/reportdata.py: 40 judged tests,
3 judges), copied `--copies` times under new keys. Printed: tests, seconds per run of
`write_report` (records already loaded), the page size, and the ratio to a 10 s budget
(the bound the test suite used to assert).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.reportdata

from kora.analysis.report.pages import write_report  # noqa: E402
from kora.analysis.report.summary import records_of  # noqa: E402
from tests.reportdata import TAXONOMY, make_judgments, results_doc  # noqa: E402

BUDGET = 10.0  # seconds for 6,000 tests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=150, help="copies of the 40 fixture tests")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    base = [j for j in make_judgments() if j.error is None]
    big = [j.model_copy(update={"key": f"{j.key}:{n}"}) for n in range(args.copies) for j in base]
    records = records_of(big)
    with tempfile.TemporaryDirectory(prefix="kora-bench-report-") as tmp:
        out = Path(tmp)
        for run in range(1, args.runs + 1):
            started = time.perf_counter()
            write_report(records, results_doc(), out / "r.html", out / "s.json", TAXONOMY)
            seconds = time.perf_counter() - started
            judged = orjson.loads((out / "s.json").read_bytes())["judged"]
            size = (out / "r.html").stat().st_size
            print(
                f"run {run}: {judged:,} tests in {seconds:.2f} s "
                f"({1e3 * seconds / judged:.3f} ms a test), report.html {size / 1e6:.1f} MB; "
                f"{seconds / BUDGET:.0%} of the {BUDGET:g} s budget"
            )


if __name__ == "__main__":
    main()
