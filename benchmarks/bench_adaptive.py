"""Adaptive seeds against fixed seeds, replayed on a fixed 20-seed catalog (issue #16).

    python benchmarks/bench_adaptive.py RESULTS_DIR [--loops mlp_digits,binary_cancer]

``RESULTS_DIR`` holds a catalog run with 20 seeds per mutant, e.g.

    trainwreck catalog --loops mlp_digits,binary_cancer --seeds 20 --fixed results_dir=DIR

Nothing is trained here. Every verdict is computed from the stored runs, as
``trainwreck catalog`` would on them:

- fixed N (N = 3, 5, 20): each mutant judged on its first N seeds against the
  reference on the same seeds (the control on its own seeds);
- adaptive: ``experiments.adaptive.adaptive_sweep`` with a ``run`` that answers from the
  stored runs. A seed is a run keyed by its seed, so the real adaptive sweep on these loops
  would ask for exactly these runs and reach exactly these verdicts; its cost is the
  stored wall time of the runs it asks for.

Reports, per mode: runs, the runs' summed wall time (and that over 2 workers), seeds per
mutant, mutants at the cap; the agreement of measured severities with fixed 20 (the
reference verdict), also with ``cost_only`` read as ``silent`` (timing follows the load of
a shared machine), and every disagreement. Prints markdown for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.adaptive import adaptive_sweep  # noqa: E402
from experiments.catalog import build_tables, load_runs, stopping_decisions  # noqa: E402
from experiments.catalog.job import catalog_parser  # noqa: E402
from experiments.catalog.plan import plan  # noqa: E402
from experiments.catalog.profiles import NOOP_SEED_OFFSET  # noqa: E402
from experiments.harness import spec as harness_spec  # noqa: E402
from experiments.trace import RESULT_FILE  # noqa: E402

MAX = 20
WORKERS = 2


def stored_rows(results: Path) -> dict[str, dict]:
    rows = {}
    for path in (results / "runs").glob(f"**/{RESULT_FILE}"):
        result = json.loads(path.read_text())
        rows[path.parent.name] = {**result, "key": path.parent.name}
    return rows


def verdicts(results: Path, keys: set[str], n_classes) -> dict[tuple, dict]:
    tables = build_tables(load_runs(results, n_classes=n_classes, keys=keys))
    mutants = tables.symptoms[tables.symptoms["role"] == "mutant"]
    return {
        (row["loop"], row["identity"]): {
            "measured": row["measured"],
            "n_seeds": row["n_seeds"],
            "stopped": row["stopped"],
            "variant": row["variant"],
        }
        for row in mutants.to_dict("records")
    }


def _no_cost(severity: str) -> str:
    return "silent" if severity == "cost_only" else severity


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results_dir")
    parser.add_argument("--loops", default="mlp_digits,binary_cancer")
    args = parser.parse_args()
    results = Path(args.results_dir)
    loops = tuple(args.loops.split(","))
    seeds = tuple(range(MAX))
    control = tuple(NOOP_SEED_OFFSET + seed for seed in range(MAX))
    rows = stored_rows(results)
    # Keys hold the harness version: plan with the one the stored catalog was recorded with,
    # so a later harness (that would rerun them) still replays the same runs.
    versions = {row.get("harness_version") for row in rows.values()}
    if len(versions) == 1 and None not in versions:
        harness_spec.HARNESS_VERSION = versions.pop()
    plan_args = catalog_parser().parse_args([f"results_dir={results}"])
    specs, _, n_classes, *_ = plan(loops, seeds, control, plan_args, {})
    # Operators added after the catalog was recorded have no runs in it: replayed without.
    by_mutant: dict[str, list] = {}
    for spec in specs:
        by_mutant.setdefault(json.dumps(spec.mutant, sort_keys=True, default=str), []).append(spec)
    absent = [group for group in by_mutant.values() if all(s.key not in rows for s in group)]
    if absent:
        print(
            f"{len(absent)} mutants planned today are not in {results}: left out", file=sys.stderr
        )
        left_out = {spec.key for group in absent for spec in group}
        specs = [spec for spec in specs if spec.key not in left_out]
    missing = [spec.key for spec in specs if spec.key not in rows]
    if missing:
        print(f"{len(missing)} planned runs are not stored in {results}", file=sys.stderr)
        return 1
    wall = {key: float(row.get("wall_s") or 0.0) for key, row in rows.items()}

    def fixed(n: int) -> set[str]:
        # The control keeps as many seeds as a mutant has (the catalog's seed-set size).
        return {
            spec.key
            for spec in specs
            if spec.seed < n
            or (spec.mutant is None and NOOP_SEED_OFFSET <= spec.seed < NOOP_SEED_OFFSET + n)
        }

    started = time.perf_counter()
    asked: set[str] = set()

    def run(chosen):
        asked.update(spec.key for spec in chosen)
        return [rows[spec.key] for spec in chosen]

    def judge(chosen_rows):
        keys = {row["key"] for row in chosen_rows}
        return stopping_decisions(load_runs(results, n_classes=n_classes, keys=keys))

    adaptive_specs = [s for s in specs if s.mutant is not None or s.seed < NOOP_SEED_OFFSET + 5]
    _, progress = adaptive_sweep(adaptive_specs, seeds, run, judge)
    replay_s = time.perf_counter() - started
    modes = {f"fixed {n}": fixed(n) for n in (3, 5, MAX)}
    modes["adaptive 3..20"] = set(asked)
    truth = verdicts(results, modes[f"fixed {MAX}"], n_classes)
    print(
        f"Loops: {', '.join(loops)}; {len(truth)} mutants; replay of the rule {replay_s:.0f} s.\n"
    )
    print(
        "| mode | runs | summed run wall (s) | / 2 workers (s) | seeds per mutant (mean) "
        "| at cap | agrees with fixed 20 | timing aside |"
    )
    print("|---|---|---|---|---|---|---|---|")
    disagreements = {}
    for mode, keys in modes.items():
        found = verdicts(results, keys, n_classes)
        agree = sum(found[key]["measured"] == truth[key]["measured"] for key in truth)
        # cost_only comes from time and memory labels (``slower`` at 2.5x the reference's
        # training time): on a loaded shared machine it follows the load, not the mutant.
        calm = sum(
            _no_cost(found[key]["measured"]) == _no_cost(truth[key]["measured"]) for key in truth
        )
        disagreements[mode] = [
            (key, found[key], truth[key]["measured"])
            for key in truth
            if found[key]["measured"] != truth[key]["measured"]
        ]
        seconds = sum(wall[key] for key in keys)
        mean = sum(v["n_seeds"] for v in found.values()) / max(len(found), 1)
        capped = sum(str(v["stopped"]).startswith("cap ") for v in found.values())
        print(
            f"| {mode} | {len(keys)} | {seconds:.0f} | {seconds / WORKERS:.0f} | {mean:.1f} "
            f"| {capped} | {agree}/{len(truth)} ({agree / len(truth):.1%}) "
            f"| {calm}/{len(truth)} ({calm / len(truth):.1%}) |"
        )
    print(f"\nAdaptive: {progress.summary()}; runs asked per round: {progress.rounds}.")
    spread = Counter(progress.seeds.values())
    print("Seeds per mutant (adaptive): " + ", ".join(f"{k}: {spread[k]}" for k in sorted(spread)))
    for mode in ("adaptive 3..20", "fixed 5"):
        print(f"\nDisagreements of {mode} with fixed 20:\n")
        for (loop, _), got, want in disagreements[mode]:
            print(
                f"- {loop} {got['variant']}: {got['measured']} ({got['n_seeds']} seeds, "
                f"{got['stopped']}) vs {want}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
