"""Rebuild the catalog files from a full-size store of runs, cold and warm.

~2000 synthetic runs of ~1000 trace records each (7 loops x 57 mutants x 5 seeds plus
references and controls, written by tests/fixtures_runs.py): the first rebuild parses every
trace, the second reads the signature cache. Target: the warm rebuild well under 30 s.

    python benchmarks/bench_report.py [--loops 7] [--mutants 57] [--steps 500]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fixtures_runs import write_study  # noqa: E402

from experiments.catalog import rebuild_report  # noqa: E402

BEHAVIOURS = ("flat", "diverge", "healthy", "slow", "nan", "crash_start", "spiky")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=7)
    parser.add_argument("--mutants", type=int, default=57)
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder)
        for index in range(args.loops):
            mutants = [
                (BEHAVIOURS[k % len(BEHAVIOURS)], f"l.py::f::op{k}#0", (f"op{k}",))
                for k in range(args.mutants)
            ]
            write_study(results, mutants=mutants, steps=args.steps, loop=f"loop{index}")
        started = time.perf_counter()
        cold = rebuild_report(results)
        cold_s = time.perf_counter() - started
        started = time.perf_counter()
        warm = rebuild_report(results)
        warm_s = time.perf_counter() - started
        size_mb = os.path.getsize(warm.files["report.html"]) / 1e6
    assert cold.n_runs == warm.n_runs and warm.cached_signatures == warm.n_runs
    print(f"{date.today()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(
        f"{warm.n_runs} runs x {args.steps} steps: cold {cold_s:.1f} s, warm {warm_s:.1f} s "
        f"(target < 30 s), report.html {size_mb:.1f} MB"
    )
    return 0 if warm_s < 30 else 1


if __name__ == "__main__":
    sys.exit(main())
