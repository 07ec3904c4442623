"""Which verdicts two catalogs of the same mutants disagree on, and what each cost (#16).

    python benchmarks/compare_catalogs.py BEFORE_DIR AFTER_DIR

Each folder holds a finished ``trainwreck catalog`` (``catalog/symptoms.csv``). Mutants
are matched by (loop, identity). Prints markdown for docs/benchmarks.md: the agreement of
measured severities (also with ``cost_only`` read as ``silent``) and of the stable symptom
labels, the confusion of measured severities, every mutant whose severity moved, and each
catalog's runs with their summed CPU seconds (the trace end record's ``cpu_s``) over 2
cores, which the load of a shared machine barely moves.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.trace import RESULT_FILE, TRACE_FILE  # noqa: E402

CORES = 2


def mutants(results: Path) -> pd.DataFrame:
    table = pd.read_csv(results / "catalog" / "symptoms.csv")
    table = table[table["role"] == "mutant"]
    return table.set_index(["loop", "identity"])


def run_cost(results: Path) -> tuple[int, float, float]:
    """Runs of the catalog (its sweep.json), their summed CPU and wall seconds."""
    keys = json.loads((results / "catalog" / "sweep.json").read_text())["keys"]
    cpu = wall = 0.0
    for key in keys:
        folder = results / "runs" / key[:2] / key
        wall += float(json.loads((folder / RESULT_FILE).read_text()).get("wall_s") or 0.0)
        try:
            last = (folder / TRACE_FILE).read_bytes().strip().splitlines()[-1]
            cpu += float(json.loads(last).get("cpu_s") or 0.0)
        except (OSError, ValueError, IndexError):
            pass
    return len(keys), cpu, wall


def _labels(value) -> set[str]:
    """Stable symptom labels ("slow_convergence 3/3, worse_model 2/3" -> those at 80%)."""
    stable = set()
    for part in str(value if isinstance(value, str) else "").split(","):
        name, _, share = part.strip().partition(" ")
        if "/" in share:
            got, of = share.split("/")[:2]
            if of.strip().isdigit() and int(of) and int(got) / int(of) >= 0.8:
                stable.add(name)
    return stable


def _calm(severity: str) -> str:
    return "silent" if severity == "cost_only" else severity


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    args = parser.parse_args()
    before, after = Path(args.before), Path(args.after)
    a, b = mutants(before), mutants(after)
    common = a.index.intersection(b.index)
    only = len(a.index.union(b.index)) - len(common)
    n = len(common)
    same = sum(a.at[k, "measured"] == b.at[k, "measured"] for k in common)
    calm = sum(_calm(a.at[k, "measured"]) == _calm(b.at[k, "measured"]) for k in common)
    labels = sum(_labels(a.at[k, "symptoms"]) == _labels(b.at[k, "symptoms"]) for k in common)
    print(f"{n} mutants in both ({only} in one only).\n")
    print("| | runs | run CPU (s) | / 2 cores (s) | run wall (s) |")
    print("|---|---|---|---|---|")
    for name, results in (("before", before), ("after", after)):
        runs, cpu, wall = run_cost(results)
        print(f"| {name} `{results}` | {runs} | {cpu:.0f} | {cpu / CORES:.0f} | {wall:.0f} |")
    print(f"\n- measured severity agrees: {same}/{n} ({same / n:.1%})")
    print(f"- with cost_only read as silent: {calm}/{n} ({calm / n:.1%})")
    print(f"- same stable symptom labels: {labels}/{n} ({labels / n:.1%})\n")
    moves = Counter((a.at[k, "measured"], b.at[k, "measured"]) for k in common)
    print("| before -> after | mutants |\n|---|---|")
    for (was, now), count in sorted(moves.items(), key=lambda item: -item[1]):
        if was != now:
            print(f"| {was} -> {now} | {count} |")
    print("\nMoved:\n")
    for key in common:
        if a.at[key, "measured"] != b.at[key, "measured"]:
            variant = a.at[key, "variant"] if "variant" in a.columns else key[1]
            print(
                f"- {key[0]} {variant}: {a.at[key, 'measured']} -> {b.at[key, 'measured']} "
                f"(symptoms {a.at[key, 'symptoms']} -> {b.at[key, 'symptoms']})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
