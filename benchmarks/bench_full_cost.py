"""Where a stored adaptive catalog's runs went, and its cost against fixed 5 seeds (#16).

    python benchmarks/bench_full_cost.py [--strength-steps N] CATALOG_ARGS...
    python benchmarks/bench_full_cost.py --profile full results_dir=/tmp/full16

``CATALOG_ARGS`` are those of a finished ``trainwreck catalog`` run (profile, loops,
seeds, operators, overrides with its ``results_dir``), e.g. the full profile: adaptive
seeds and the strength pass. Nothing is trained: the catalog's own code is replayed on the stored
runs (``adaptive_sweep`` with a ``run`` that answers from the store, then the strength
pass with a harness that does the same), so each phase asks for exactly the runs the real
catalog asked for, and a run is counted in the first phase that asked for it.

Cost is each run's own CPU seconds (user+sys of its process: the trace's end record
``cpu_s``), which the load of the shared machine barely moves, over 2 cores; the stored
wall time (``wall_s``, load included) is shown beside it. The fixed-5 baseline is computed
the same way from the same store: every mutant planned today on the first 5 seeds, the
reference on them, 5 control seeds per loop; a mutant seed the adaptive catalog never ran
costs that mutant's mean over its stored seeds (every mutant has at least 3).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.adaptive import Progress, adaptive_sweep, mutant_key  # noqa: E402
from experiments.catalog import load_runs, stopping_decisions  # noqa: E402
from experiments.catalog.job import catalog_parser  # noqa: E402
from experiments.catalog.plan import plan  # noqa: E402
from experiments.catalog.profiles import (  # noqa: E402
    NOOP_SEED_OFFSET,
    PROFILES,
    noop_seeds_for,
    strength_loops,
)
from experiments.harness import spec as harness_spec  # noqa: E402
from experiments.symptoms.sequential import MIN_SEEDS  # noqa: E402
from experiments.trace import RESULT_FILE, TRACE_FILE  # noqa: E402

CORES = 2
FIXED = 5


class NotStored(Exception):
    """The replay asked for a run the store does not hold."""


def end_cpu(trace: Path) -> float | None:
    """``cpu_s`` of the trace's end record (its last line), read from the file's tail."""
    try:
        with open(trace, "rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(handle.tell() - 4096, 0))
            last = handle.read().decode("utf-8", "replace").strip().splitlines()[-1]
        record = json.loads(last)
    except (OSError, ValueError, IndexError):
        return None
    cpu = record.get("cpu_s") if record.get("kind") == "end" else None
    return float(cpu) if isinstance(cpu, int | float) else None


def stored_rows(results: Path) -> dict[str, dict]:
    rows = {}
    for path in (results / "runs").glob(f"*/*/{RESULT_FILE}"):
        row = json.loads(path.read_text())
        row["key"] = path.parent.name
        row["cpu_s"] = end_cpu(path.parent / TRACE_FILE)
        rows[row["key"]] = row
    return rows


class Ledger:
    """Which phase first asked for each run, answered from the store."""

    def __init__(self, rows: dict[str, dict]) -> None:
        self.rows = rows
        self.phase = "?"
        self.first: dict[str, str] = {}
        self.order: list[str] = []

    def __call__(self, specs: list) -> list[dict]:
        missing = [spec.run_id for spec in specs if spec.key not in self.rows]
        if missing:
            raise NotStored(f"{len(missing)} runs not stored, e.g. {missing[0]}")
        for spec in specs:
            if spec.key not in self.first:
                self.first[spec.key] = self.phase
                if self.phase not in self.order:
                    self.order.append(self.phase)
        return [self.rows[spec.key] for spec in specs]

    def keys_of(self, phase: str) -> list[str]:
        return [key for key, where in self.first.items() if where == phase]


def cost(rows: dict[str, dict], keys, field: str) -> float:
    return sum(float(rows[key].get(field) or 0.0) for key in keys)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Every other argument is the catalog command's, e.g. --profile full "
        "results_dir=/tmp/full16",
    )
    parser.add_argument(
        "--strength-steps",
        type=int,
        help="replay the strength pass with this many bisection steps (default: the "
        "catalog's); fewer steps are a prefix of each search, so their runs are stored",
    )
    args, catalog_argv = parser.parse_known_args()
    catalog = catalog_parser().parse_args(catalog_argv)
    profile = PROFILES[catalog.profile]
    loops = tuple(catalog.loops.split(",")) if catalog.loops else profile.loops
    adaptive = profile.adaptive if catalog.adaptive is None else catalog.adaptive
    seeds, noop_seeds = profile.seeds, profile.noop_seeds
    if catalog.seeds is not None:
        seeds = tuple(range(catalog.seeds))
        noop_seeds = noop_seeds if adaptive else noop_seeds_for(seeds)
    strength = profile.strength if catalog.strength is None else catalog.strength
    specs, results, n_classes, *_ = plan(loops, seeds, noop_seeds, catalog, dict(profile.epochs))
    rows = stored_rows(results)
    if not rows:
        print(f"{results}: no stored runs", file=sys.stderr)
        return 2
    versions = {row.get("harness_version") for row in rows.values()}
    if len(versions) == 1 and None not in versions and versions != {harness_spec.HARNESS_VERSION}:
        harness_spec.HARNESS_VERSION = versions.pop()  # plan the keys the store was made with
        specs, *_ = plan(loops, seeds, noop_seeds, catalog, dict(profile.epochs))
    ledger = Ledger(rows)
    rounds = {"n": 0}

    def run_round(chosen: list) -> list[dict]:
        rounds["n"] += 1
        ledger.phase = f"round {rounds['n']}"
        return ledger(chosen)

    def judge(chosen_rows: list[dict]):
        keys = {row["key"] for row in chosen_rows}
        return stopping_decisions(load_runs(results, n_classes=n_classes, keys=keys))

    # The references and the control run before round 1's mutants (the reference gate).
    ledger.phase = "references + control (round 1)"
    first = set(seeds[:MIN_SEEDS] if adaptive else seeds) | set(noop_seeds)
    ledger([s for s in specs if s.mutant is None and s.seed in first])
    if adaptive:
        _, progress = adaptive_sweep(specs, seeds, run_round, judge)
    else:
        run_round(specs)
        progress = Progress(seeds={mutant_key(s): len(seeds) for s in specs if s.mutant})
    strength_note = ""
    if strength:
        epochs = dict(profile.epochs)

        def overrides_of(loop: str) -> list[str]:
            ledger.phase = "strength"
            own = [f"loop.epochs={epochs[loop]}"] if loop in epochs else []
            return [*own, *catalog.overrides]

        searched = strength_loops(profile, loops, catalog.strength_loops)
        strength_note = _replay_strength(searched, overrides_of, len(seeds), ledger, args)

    print(
        f"Catalog {results} ({catalog.profile} profile, {len(loops)} loops): {progress.summary()}."
    )
    print("\n| phase | runs | run CPU (s) | CPU / 2 cores (s) | run wall (s) |")
    print("|---|---|---|---|---|")
    total_cpu = total_wall = total_runs = 0.0
    for phase in ledger.order:
        keys = ledger.keys_of(phase)
        cpu, wall = cost(rows, keys, "cpu_s"), cost(rows, keys, "wall_s")
        total_cpu, total_wall, total_runs = (
            total_cpu + cpu,
            total_wall + wall,
            total_runs + len(keys),
        )
        print(f"| {phase} | {len(keys)} | {cpu:.0f} | {cpu / CORES:.0f} | {wall:.0f} |")
    print(
        f"| **adaptive catalog** | {total_runs:.0f} | {total_cpu:.0f} | "
        f"**{total_cpu / CORES:.0f}** | {total_wall:.0f} |"
    )
    fixed_runs, fixed_cpu, fixed_wall, estimated = _fixed(specs, rows)
    print(
        f"| **fixed {FIXED} (same mutants)** | {fixed_runs} | {fixed_cpu:.0f} | "
        f"**{fixed_cpu / CORES:.0f}** | {fixed_wall:.0f} |"
    )
    print(
        f"\nAdaptive / fixed {FIXED}: {total_cpu / fixed_cpu:.2f}x the run CPU, "
        f"{total_runs / fixed_runs:.2f}x the runs, {total_wall / fixed_wall:.2f}x the stored "
        f"wall. Fixed {FIXED}: {estimated} of its runs not stored, costed at their mutant's "
        "mean."
    )
    # Runs in the folder that no phase asked for: an earlier catalog's (e.g. the strength
    # pass of older code, or `trainwreck strength` runs), not part of this replay's cost.
    unasked = [key for key in rows if key not in ledger.first]
    print(
        f"Stored runs this replay did not ask for: {len(unasked)} "
        f"({cost(rows, unasked, 'cpu_s'):.0f} s run CPU)."
    )
    unknown = sum(1 for key in ledger.first if rows[key].get("cpu_s") is None)
    if unknown:
        print(f"{unknown} runs have no cpu_s (recorded before the harness wrote it): cost 0.")
    spread = Counter(progress.seeds.values())
    print("Seeds per mutant: " + ", ".join(f"{k}: {spread[k]}" for k in sorted(spread)) + ".")
    past = sum(count for seeds, count in spread.items() if seeds > FIXED)
    print(f"Mutants undecided at {FIXED} seeds (given more, up to {len(seeds)}): {past}.")
    print(f"Runs asked per round (cumulative): {progress.rounds}.")
    _per_loop(ledger, rows, specs)
    if strength_note:
        print(strength_note)
    return 0


def _replay_strength(loops, overrides_of, max_seeds: int, ledger: Ledger, args) -> str:
    """Every (loop, axis) search of the catalog's pass (``strength_pass``), one at a time, so
    that a search whose runs are not all stored is named and the others still count."""
    from experiments.cli_support import UserError
    from experiments.strength.axes import AXES
    from experiments.strength.catalog_pass import CATALOG_STEPS
    from experiments.strength.cli import summary_line
    from experiments.strength.runner import prepare

    steps = CATALOG_STEPS if args.strength_steps is None else args.strength_steps
    lines, missing = [], []
    for loop in loops:
        for axis in AXES:
            name = f"{loop} {axis.operator} ({axis.direction})"
            try:
                session = prepare(loop, axis, overrides_of(loop), None, max_seeds, ledger)
                result = session.search(steps)
            except UserError as error:
                if "has no site" in str(error):
                    continue
                raise
            except NotStored as why:
                missing.append(f"{name}: {why}")
                continue
            settings = len(result.points)
            lines.append(f"{loop}: {summary_line(result)} [{settings} settings]")
    note = f"Strength pass: {len(lines)} searches replayed at {steps} bisection steps"
    if missing:
        note += f"; {len(missing)} not (runs not stored: not run, or run by older code)"
    return note + ":\n" + "\n".join(f"- {line}" for line in lines + missing)


def _fixed(specs, rows: dict[str, dict]) -> tuple[int, float, float, int]:
    """Fixed 5 over today's plan: stored runs, else the mutant's mean over stored seeds."""
    by_mutant: dict[tuple, list[dict]] = defaultdict(list)
    for spec in specs:
        if spec.mutant is not None and spec.key in rows:
            by_mutant[mutant_key(spec)].append(rows[spec.key])
    chosen = [
        spec
        for spec in specs
        if spec.seed in range(FIXED)
        or (spec.mutant is None and NOOP_SEED_OFFSET <= spec.seed < NOOP_SEED_OFFSET + FIXED)
    ]
    cpu = wall = 0.0
    estimated = 0
    for spec in chosen:
        row = rows.get(spec.key)
        if row is None:
            estimated += 1
            stored = by_mutant.get(mutant_key(spec), [])
            cpu += mean(float(r.get("cpu_s") or 0.0) for r in stored) if stored else 0.0
            wall += mean(float(r.get("wall_s") or 0.0) for r in stored) if stored else 0.0
        else:
            cpu += float(row.get("cpu_s") or 0.0)
            wall += float(row.get("wall_s") or 0.0)
    return len(chosen), cpu, wall, estimated


def _per_loop(ledger: Ledger, rows: dict[str, dict], specs) -> None:
    loops = sorted({spec.loop_name for spec in specs})
    print("\nRun CPU (s) per loop and phase (sweep: every round; strength: the pass):\n")
    print("| loop | sweep runs | sweep CPU | strength runs | strength CPU | CPU per run |")
    print("|---|---|---|---|---|---|")
    for loop in loops:
        sweep = [k for k, p in ledger.first.items() if p != "strength" and rows[k]["loop"] == loop]
        strength = [
            k for k, p in ledger.first.items() if p == "strength" and rows[k]["loop"] == loop
        ]
        every = sweep + strength
        per_run = cost(rows, every, "cpu_s") / max(len(every), 1)
        print(
            f"| {loop} | {len(sweep)} | {cost(rows, sweep, 'cpu_s'):.0f} | {len(strength)} "
            f"| {cost(rows, strength, 'cpu_s'):.0f} | {per_run:.2f} |"
        )


if __name__ == "__main__":
    sys.exit(main())
