"""Each training check's kill rate over the reference loops (issue 24): which check catches
which bugs, and which bugs no check catches.

    python benchmarks/bench_checks.py [--loops mlp_digits,cnn_digits] [--workers 2]
        [--timeout-factor 10] [--results DIR] [--out FILE] [--aggregate-only]
    python benchmarks/bench_checks.py --project tests/projects/fit_api
        --mutate fitkit/training.py [--tests tests/] [same options]

For each loop, ``trainwreck test`` runs the loop's check tests (``tests/loop_checks/``)
against every mutant of the loop, without ``-x`` so that ``killed_by`` lists every test
that failed:

    python -m experiments.cli test --mutate reference_loops/<loop>.py --workers W
        --timeout-factor 10 --out DIR/<loop> -- python -m pytest -q -p no:cacheprovider
        tests/loop_checks/test_<loop>.py

With ``--project DIR`` (issue 30: checks no reference loop can exercise, on a project
with a ``fit()`` API), it measures that project's own suite instead, from DIR as the current
folder, the project being the one "loop" of the tables (named after DIR):

    python -m experiments.cli test --mutate <FILE> --workers W --timeout-factor 10
        --out DIR/<project> -- python -m pytest -q -p no:cacheprovider tests/

A check kills a mutant when its own test failed with ``CheckFailed`` (the ``failed_with``
column). A test that failed with anything else (the loop crashed under it, or the test's
own plumbing broke: the flat loop's stepping driver waits for an ``optimizer.step()`` that
never comes) killed the mutant for the suite, not for the check: counted apart, with what
it failed with. Every rate is over the mutants the suite judged, killed + survived, as
``trainwreck test``'s score is: an unconfirmed, timeout, stillborn or unreached mutant says
nothing about a check and is counted apart.

Results go to DIR (default: ``trainwreck-bench-checks`` in the temporary folder, outside
the repository: every file of the project is in ``trainwreck test``'s cache key, so one
loop's results written inside it would make the next loops' caches stale). A rerun with
nothing changed runs nothing; ``--aggregate-only`` reads DIR and runs nothing at all.
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "benchmarks") not in sys.path:  # loaded by a test, or run from anywhere
    sys.path.insert(0, str(REPO / "benchmarks"))

from check_tables import (  # noqa: E402
    CHECK_FAILED,
    JUDGED,
    NOT_JUDGED,
    OTHER_STATUSES,
    SUMMARY_OPERATORS,
    Mutant,
    check_of,
    check_table,
    checks_in,
    grouped,
    loop_table,
    matrix,
    operator_table,
    other_kills,
    read_mutants,
    render,
    summary,
    uncaught,
    unjudged,
)

__all__ = [
    "CHECK_FAILED",
    "JUDGED",
    "NOT_JUDGED",
    "OTHER_STATUSES",
    "SUMMARY_OPERATORS",
    "Mutant",
    "check_of",
    "check_table",
    "checks_in",
    "grouped",
    "loop_table",
    "main",
    "matrix",
    "operator_table",
    "other_kills",
    "read_mutants",
    "render",
    "summary",
    "uncaught",
    "unjudged",
]

PYTEST = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]


def tests_command(loop: str, only: str | None = None) -> list[str]:
    return [*PYTEST, f"tests/loop_checks/test_{loop}.py", *(["-k", only] if only else [])]


def project_tests_command(tests: Sequence[str], only: str | None = None) -> list[str]:
    return [*PYTEST, *tests, *(["-k", only] if only else [])]


def run_loop(
    loop: str, workers: int, results: Path, timeout_factor: float, only: str | None = None
) -> float:
    """``trainwreck test`` on one loop; its wall time."""
    mutate = [f"reference_loops/{loop}.py"]
    return run_suite(
        loop, REPO, mutate, tests_command(loop, only), workers, results, timeout_factor
    )


def run_suite(
    label: str,
    cwd: Path,
    mutate: Sequence[str],
    tests: Sequence[str],
    workers: int,
    results: Path,
    timeout_factor: float,
) -> float:
    """``trainwreck test`` from ``cwd`` on the ``mutate`` files with the ``tests`` command;
    its wall time. Stops with the command's last lines when it fails (an unmutated
    project whose tests fail: nothing to measure)."""
    argv = [sys.executable, "-m", "experiments.cli", "test"]
    for path in mutate:
        argv += ["--mutate", path]
    argv += ["--workers", str(workers), "--timeout-factor", str(timeout_factor)]
    argv += ["--out", str(results / label), "--", *tests]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(
            f"{label}: trainwreck test exited {done.returncode}:\n{done.stderr[-3000:]}"
        )
    print(f"{label}: {wall:.0f} s; {done.stdout.strip().splitlines()[-1]}", file=sys.stderr)
    return wall


def load(loop: str, results: Path) -> tuple[list[Mutant], Counter]:
    path = results / loop / "mutants.csv"
    if not path.is_file():
        raise SystemExit(f"{loop}: no {path}; run without --aggregate-only first")
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return read_mutants(rows, loop), Counter(
        "cached" if r["cached"] == "True" else "run" for r in rows
    )


def _project(args: argparse.Namespace) -> Path | None:
    """The project folder of ``--project``, its options checked; None for the loops."""
    if args.project is None:
        if args.mutate or args.tests:
            raise SystemExit("--mutate and --tests go with --project DIR (a project folder)")
        return None
    if args.loops is not None:
        raise SystemExit("--loops or --project, not both: --project measures one project")
    project = args.project.resolve()
    if not project.is_dir():
        raise SystemExit(f"--project: {args.project} is not a folder; give a project folder")
    if not args.mutate:
        raise SystemExit("--project needs --mutate FILE (its training module, relative to it)")
    missing = [path for path in args.mutate if not (project / path).is_file()]
    if missing:
        raise SystemExit(
            f"--mutate: no {', '.join(missing)} in {args.project}; give paths relative to it"
        )
    return project


def _group(text: str) -> tuple[str, str]:
    label, sep, prefix = text.partition("=")
    if not (sep and label and prefix):
        raise SystemExit(f"--group: {text!r} is not LABEL=PREFIX (e.g. fit_step=fit_step_)")
    return label, prefix


def main(argv: Sequence[str] | None = None) -> None:
    from experiments.loops import loop_names

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", help="comma-separated loops (default: all)")
    parser.add_argument("--project", type=Path, help="measure this project's own suite instead")
    parser.add_argument(
        "--mutate", action="append", default=[], help="with --project: a file to mutate"
    )
    parser.add_argument(
        "--tests", action="append", default=[], help="with --project: pytest paths (tests/)"
    )
    parser.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="LABEL=PREFIX",
        help="also count the tests whose check name starts with PREFIX as one (repeatable)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--results", type=Path, default=Path(tempfile.gettempdir()) / "trainwreck-bench-checks"
    )
    # A mutant that makes the tests several times slower (a batch 8x larger) is not a
    # hang; at trainwreck test's default (4) it timed out or not with the machine's load.
    parser.add_argument("--timeout-factor", type=float, default=10.0)
    parser.add_argument("--out", type=Path, help="also write the tables (markdown) here")
    parser.add_argument("--aggregate-only", action="store_true", help="read --results, run nothing")
    parser.add_argument(
        "--only", metavar="EXPR", help="only the check tests pytest -k EXPR selects (new checks)"
    )
    args = parser.parse_args(argv)
    project = _project(args)
    groups = dict(_group(text) for text in args.group)
    if project is not None:
        loops = [project.name]
        tests = project_tests_command(args.tests or ["tests/"], args.only)
        mutated = " ".join(f"--mutate {path}" for path in args.mutate)
        per = f"from {args.project}: `trainwreck test {mutated}"
    else:
        loops = [name for name in (args.loops or ",".join(loop_names())).split(",") if name]
        unknown = sorted(set(loops) - set(loop_names()))
        if unknown:
            raise SystemExit(
                f"--loops: unknown {', '.join(unknown)}; choose from {', '.join(loop_names())}"
            )
        tests = tests_command("<loop>", args.only)
        per = "per loop: `trainwreck test --mutate reference_loops/<loop>.py"
    began = datetime.now(timezone.utc)
    wall_s = None
    if args.aggregate_only:
        pass
    elif project is not None:
        wall_s = {
            project.name: run_suite(
                project.name,
                project,
                args.mutate,
                tests,
                args.workers,
                args.results.resolve(),
                args.timeout_factor,
            )
        }
    else:
        wall_s = {
            loop: run_loop(loop, args.workers, args.results, args.timeout_factor, args.only)
            for loop in loops
        }
    mutants: list[Mutant] = []
    runs: Counter = Counter()
    for loop in loops:
        found, counted = load(loop, args.results)
        mutants += found
        runs += counted
    from bench_loops import machine

    command = shlex.join(
        ["python", "benchmarks/bench_checks.py", *(argv if argv is not None else sys.argv[1:])]
    )
    header = [
        f"Command: `{command}` ({per} "
        f"--workers {args.workers} --timeout-factor {args.timeout_factor:g} -- {' '.join(tests)}`)",
        f"Machine: {machine()}. Date: {began:%Y-%m-%d %H:%M}-{datetime.now(timezone.utc):%H:%M} UTC.",
        f"Mutants: {len(mutants)} ({runs['run']} run, {runs['cached']} from the cache).",
    ]
    text = render(mutants, header, wall_s, groups, with_unjudged=project is not None)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
