"""Time to generate every first-order mutant of every reference loop (target: < 3 s in total).

Usage: python benchmarks/bench_mutate.py [--repeat N]
Counts parse + site finding + apply/render/compile/diff of each mutant, per loop and in total.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from mutations.registry import all_variants
from mutator import SourceFile

ROOT = Path(__file__).resolve().parent.parent


def generate(path: Path, operators) -> int:
    source = SourceFile.from_path(str(path))
    return sum(1 for site in source.find_sites(operators) if source.apply([site]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    operators = all_variants()
    loops = sorted(p for p in (ROOT / "reference_loops").glob("*.py") if not p.name.startswith("_"))
    generate(loops[0], operators)  # warm caches (imports, libcst's native parser)
    totals, per_loop = [], {p.name: [] for p in loops}
    counts = {}
    for _ in range(args.repeat):
        start_all = time.perf_counter()
        for path in loops:
            start = time.perf_counter()
            counts[path.name] = generate(path, operators)
            per_loop[path.name].append(time.perf_counter() - start)
        totals.append(time.perf_counter() - start_all)
    print(f"{len(operators)} operator variants, {len(loops)} loops, {args.repeat} repeats\n")
    print("| loop | mutants | median s |\n|---|---:|---:|")
    for name, times in per_loop.items():
        print(f"| {name} | {counts[name]} | {statistics.median(times):.3f} |")
    total = sum(counts.values())
    print(
        f"| **all** | **{total}** | **{statistics.median(totals):.3f}** (min {min(totals):.3f}) |"
    )
    print(f"\nper mutant: {1000 * statistics.median(totals) / max(total, 1):.2f} ms")


if __name__ == "__main__":
    main()
