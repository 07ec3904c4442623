"""Real faults (issue 32): do the mutants stand for the training bugs people actually make?

Usage: python benchmarks/bench_real_faults.py --mirrors DIR [--json] [--only ID ...]
       python benchmarks/bench_real_faults.py --mirrors DIR --by-operator
       python benchmarks/bench_real_faults.py --mirrors DIR --run [--seeds N] [--results DIR]

Reads each fix of ``benchmarks/real_faults.toml`` from the git mirrors under DIR (faulty =
the fix's parent, fixed = the fix), mutates the fixed file with every operator and decides
the coupling (``experiments.bench.real.coupling``: exact, partial, none). ``--run`` also runs, for the
faults that declare how to run offline (``run`` in the set), the fixed file, the faulty one
and the candidate mutants through the harness on the same seeds: a mutant whose runs have
the faulty version's trace on every seed makes the fault ``equivalent``, and a side-by-side
table compares the real bug's outcome and symptoms with its mutant's
(``real_faults_runs``). The method and the results: docs/real-faults.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:  # run as a script from anywhere, or loaded by a test
        sys.path.insert(0, _path)

import real_faults_report  # noqa: E402

from experiments.bench.real import replay  # noqa: E402
from experiments.bench.real.coupling import UNREAD, Coupling, couple  # noqa: E402


def evaluate(faults: list[replay.Fault], mirrors: Path) -> list[Coupling]:
    results = []
    for fault in faults:
        try:
            pair = replay.read_pair(fault, mirrors)
        except ValueError as error:
            results.append(Coupling(fault, UNREAD, reason=str(error)))
            continue
        results.append(couple(fault, pair))
    return results


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", required=True, help="folder of <owner>+<name>/repo mirrors")
    parser.add_argument("--set", default=str(replay.REPLAY_SET), help="replay-set TOML")
    parser.add_argument("--only", nargs="*", default=[], help="fault ids to evaluate")
    parser.add_argument("--json", action="store_true", help="print the per-fault rows as JSON")
    parser.add_argument(
        "--by-operator",
        action="store_true",
        help="print every registered operator with the real faults it couples with",
    )
    parser.add_argument("--run", action="store_true", help="also run the offline faults")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per run (with --run)")
    parser.add_argument("--results", default="", help="results folder for --run (default: temp)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    mirrors = Path(args.mirrors)
    if not mirrors.is_dir():
        print(
            f"bench_real_faults: --mirrors {mirrors} is not a folder (want DIR/<owner>+<name>/repo)",
            file=sys.stderr,
        )
        return 2
    try:
        faults = replay.load(Path(args.set))
    except (OSError, ValueError) as error:
        print(f"bench_real_faults: {error}", file=sys.stderr)
        return 2
    if args.only:
        unknown = sorted(set(args.only) - {f.id for f in faults})
        if unknown:
            print(f"bench_real_faults: unknown fault ids: {', '.join(unknown)}", file=sys.stderr)
            return 2
        faults = [f for f in faults if f.id in args.only]
    results = evaluate(faults, mirrors)
    side_by_side: list[str] = []
    if args.run:
        import real_faults_runs  # only here: it starts the harness

        side_by_side = real_faults_runs.run_offline(results, mirrors, args.seeds, args.results)
    if args.json:
        print(json.dumps(real_faults_report.as_json(results), indent=1))
        return 0
    if args.by_operator:
        print("\n".join(real_faults_report.registry_table(results)))
        return 0
    print(real_faults_report.render(results), end="")
    if side_by_side:
        print("\n## Real bug beside its mutant (offline runs)\n")
        print("\n".join(side_by_side))
    return 0


if __name__ == "__main__":
    sys.exit(main())
