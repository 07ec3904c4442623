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
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from experiments.mutation_testing.report import markdown_table

REPO = Path(__file__).resolve().parents[1]
CHECK_FAILED = "CheckFailed"
JUDGED = ("killed", "survived")
OTHER_STATUSES = ("unconfirmed", "timeout", "stillborn", "unreached")
NOT_JUDGED = ("unconfirmed", "timeout", "stillborn")  # ran, but no verdict to count
SUMMARY_OPERATORS = 6  # operators named per check in the short table


@dataclass(frozen=True)
class Mutant:
    """One row of a loop's ``mutants.csv``, as the tables need it."""

    loop: str
    identity: str
    operator: str
    category: str
    status: str
    caught_by: tuple[str, ...]  # the checks whose own test failed with CheckFailed
    other: tuple[tuple[str, str], ...]  # (test, what it failed with) of every other failure
    detail: str = ""  # trainwreck test's word on the mutant (why unconfirmed, what failed)

    @property
    def judged(self) -> bool:
        return self.status in JUDGED


def check_of(test_id: str) -> str:
    """The check a test id stands for: ``.../test_<loop>.py::test_overfit_batch[x]`` ->
    ``overfit_batch``; an id that is no test (``<exit status 1>``) stays as it is."""
    if "::" not in test_id:
        return test_id
    name = test_id.rpartition("::")[2].partition("[")[0]
    return name.removeprefix("test_")


def read_mutants(rows: Iterable[dict[str, str]], loop: str) -> list[Mutant]:
    """``mutants.csv`` rows (``csv.DictReader``) of one loop."""
    found = []
    for row in rows:
        if "failed_with" not in row:
            raise SystemExit(
                f"{loop}: mutants.csv has no failed_with column (an older trainwreck test "
                "wrote it); rerun without --aggregate-only"
            )
        tests = [test for test in row["killed_by"].split(";") if test]
        kinds = row["failed_with"].split(";") if row["failed_with"] else []
        kinds += [""] * (len(tests) - len(kinds))
        caught, other = [], []
        for test, kind in zip(tests, kinds):
            if kind.rpartition(":")[2] == CHECK_FAILED:
                caught.append(check_of(test))
            else:
                other.append((test, kind or "no record"))
        found.append(
            Mutant(
                loop=loop,
                identity=row["identity"],
                operator=row["operator"],
                category=row["category"],
                status=row["status"],
                caught_by=tuple(dict.fromkeys(caught)),
                other=tuple(other),
                detail=_reason(row) if row["status"] in NOT_JUDGED else "",
            )
        )
    return found


def _reason(row: dict[str, str]) -> str:
    """Why a mutant that ran has no verdict: the witness's word, then what failed."""
    return "; ".join(part for part in (row.get("witness", ""), row.get("detail", "")) if part)


def _rate(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "n/a"


def checks_in(mutants: Sequence[Mutant]) -> list[str]:
    """Every check that killed or failed otherwise at least once, by name."""
    names = {check for m in mutants for check in m.caught_by}
    names |= {check_of(test) for m in mutants for test, _ in m.other if "::" in test}
    return sorted(names)


def loop_table(mutants: Sequence[Mutant], wall_s: dict[str, float] | None = None) -> list[list]:
    """Per loop: how its mutants ended, and how many a check (not just the suite) killed."""
    head = ["loop", "mutants", "killed by a check", "killed otherwise only", "survived"]
    head += [*OTHER_STATUSES, "checks' score", "suite's score"]
    if wall_s is not None:
        head.append("wall s")
    lines = [head]
    groups: dict[str, list[Mutant]] = defaultdict(list)
    for mutant in mutants:
        groups[mutant.loop].append(mutant)
    for loop in [*sorted(groups), "all"]:
        group = list(mutants) if loop == "all" else groups[loop]
        counts = Counter(m.status for m in group)
        by_check = sum(1 for m in group if m.status == "killed" and m.caught_by)
        judged = counts["killed"] + counts["survived"]
        line = [f"**{loop}**" if loop == "all" else loop, str(len(group)), str(by_check)]
        line += [str(counts["killed"] - by_check), str(counts["survived"])]
        line += [str(counts[status]) for status in OTHER_STATUSES]
        line += [_rate(by_check, judged), _rate(counts["killed"], judged)]
        if wall_s is not None:
            total = sum(wall_s.values()) if loop == "all" else wall_s.get(loop)
            line.append("" if total is None else f"{total:.0f}")
        lines.append(line)
    return lines


def check_table(mutants: Sequence[Mutant]) -> list[list[str]]:
    """Per check: the judged mutants it caught, those it alone caught, the loops and
    operators, and how often its test failed with something other than its verdict."""
    judged = [m for m in mutants if m.judged]
    lines = [["check", "caught (of judged)", "caught alone", "failed otherwise", "caught most"]]
    for check in checks_in(mutants):
        caught = [m for m in judged if check in m.caught_by]
        alone = sum(1 for m in caught if m.caught_by == (check,))
        otherwise = sum(1 for m in judged if any(check_of(t) == check for t, _ in m.other))
        top = Counter(m.operator for m in caught).most_common(4)
        most = ", ".join(f"{name} {count}" for name, count in top)
        lines.append([check, _rate(len(caught), len(judged)), str(alone), str(otherwise), most])
    return lines


def matrix(mutants: Sequence[Mutant], by: str = "category") -> list[list[str]]:
    """Checks x categories (or operators): caught / judged mutants of that column."""
    judged = [m for m in mutants if m.judged]
    columns = sorted({getattr(m, by) for m in judged})
    totals = Counter(getattr(m, by) for m in judged)
    lines = [["check", *(f"{c} (n={totals[c]})" for c in columns)]]

    def row(name: str, keep) -> list[str]:
        kept = Counter(getattr(m, by) for m in judged if keep(m))
        return [name, *(f"{kept[c]}" for c in columns)]

    for check in checks_in(mutants):
        lines.append(row(check, lambda m, check=check: check in m.caught_by))
    lines.append(row("**any check**", lambda m: bool(m.caught_by)))
    lines.append(row("killed otherwise only", lambda m: m.status == "killed" and not m.caught_by))
    lines.append(row("**survived**", lambda m: m.status == "survived"))
    return lines


def operator_table(mutants: Sequence[Mutant]) -> list[list[str]]:
    """Per operator: which checks caught its mutants, and how the others ended."""
    head = ["operator", "category", "mutants", "caught by a check", "by which checks"]
    lines = [[*head, "killed otherwise only", "survived", *OTHER_STATUSES]]
    groups: dict[str, list[Mutant]] = defaultdict(list)
    for mutant in mutants:
        groups[mutant.operator].append(mutant)
    for operator in sorted(groups):
        group = groups[operator]
        counts = Counter(m.status for m in group)
        caught = [m for m in group if m.status == "killed" and m.caught_by]
        which = Counter(check for m in caught for check in m.caught_by).most_common()
        line = [operator, group[0].category, str(len(group)), str(len(caught))]
        line.append(", ".join(f"{name} {count}" for name, count in which))
        line += [str(counts["killed"] - len(caught)), str(counts["survived"])]
        lines.append(line + [str(counts[status]) for status in OTHER_STATUSES])
    return lines


def uncaught(mutants: Sequence[Mutant]) -> list[list[str]]:
    """The judged mutants no check caught (survived, or killed otherwise only), per
    operator, with the loops they are in."""
    lines = [["operator", "category", "no check caught", "of judged", "in loops"]]
    groups: dict[str, list[Mutant]] = defaultdict(list)
    for mutant in mutants:
        if mutant.judged:
            groups[mutant.operator].append(mutant)
    for operator in sorted(groups):
        missed = [m for m in groups[operator] if not m.caught_by]
        if not missed:
            continue
        loops = Counter(m.loop for m in missed)
        where = ", ".join(f"{loop} {count}" for loop, count in sorted(loops.items()))
        judged = str(len(groups[operator]))
        lines.append([operator, missed[0].category, str(len(missed)), judged, where])
    return lines


def other_kills(mutants: Sequence[Mutant]) -> list[list[str]]:
    """Mutants the suite killed with no check's verdict: what each failing test raised."""
    lines = [["mutant", "loop", "what its failing tests failed with"]]
    for m in mutants:
        if m.status == "killed" and not m.caught_by:
            kinds = Counter(kind for _test, kind in m.other)
            what = ", ".join(
                f"{kind} ({count} {'tests' if count > 1 else 'test'})"
                for kind, count in kinds.items()
            )
            lines.append([f"`{m.identity.rpartition('/')[2]}`", m.loop, what])
    return lines


def summary(mutants: Sequence[Mutant]) -> list[list[str]]:
    """The short table for docs/checks.md: per check, what it caught; then what none did."""
    judged = [m for m in mutants if m.judged]
    lines = [["check", "caught (of judged mutants)", "the bugs it catches most (operator mutants)"]]
    for check in checks_in(mutants):
        caught = [m for m in judged if check in m.caught_by]
        if not caught:
            continue
        top = Counter(m.operator for m in caught).most_common()
        most = ", ".join(f"{n} {c}" for n, c in top[:SUMMARY_OPERATORS])
        if len(top) > SUMMARY_OPERATORS:
            most += f", {len(top) - SUMMARY_OPERATORS} more operators"
        lines.append([check, _rate(len(caught), len(judged)), most])
    missed = Counter(m.operator for m in judged if not m.caught_by)
    never = sorted(op for op in missed if not any(op == m.operator and m.caught_by for m in judged))
    lines.append(
        [
            "**no check**",
            _rate(sum(missed.values()), len(judged)),
            "never caught: "
            + (", ".join(never) or "none")
            + f"; sometimes missed: {', '.join(sorted(set(missed) - set(never))) or 'none'}",
        ]
    )
    return lines


def grouped(mutants: Sequence[Mutant], groups: dict[str, str]) -> list[list[str]]:
    """Per group of tests (``label`` -> a test-name prefix, e.g. every ``fit_step_*`` test
    driving a ``fit()`` API through ``make_fit_step``): the judged mutants any of them
    caught, and by which operators."""
    judged = [m for m in mutants if m.judged]
    lines = [["group", "its tests", "caught (of judged)", "operators caught"]]
    for label, prefix in groups.items():
        members = [c for c in checks_in(mutants) if c.startswith(prefix)]
        caught = [m for m in judged if any(c.startswith(prefix) for c in m.caught_by)]
        top = Counter(m.operator for m in caught).most_common()
        operators = ", ".join(f"{name} {count}" for name, count in top)
        lines.append([label, ", ".join(members), _rate(len(caught), len(judged)), operators])
    return lines


def unjudged(mutants: Sequence[Mutant]) -> list[list[str]]:
    """Mutants that ran but have no verdict to count (unconfirmed, timeout, stillborn), with
    trainwreck test's reason: a check's failure on an unconfirmed mutant is not counted."""
    lines = [["mutant", "status", "trainwreck test's reason"]]
    for m in mutants:
        if m.status in NOT_JUDGED:
            reason = m.detail.replace("|", "/").replace("\n", " ")
            lines.append([f"`{m.identity.rpartition('/')[2]}`", m.status, reason])
    return lines


def render(
    mutants: Sequence[Mutant],
    header: Sequence[str],
    wall_s: dict[str, float] | None,
    groups: dict[str, str] | None = None,
    with_unjudged: bool = False,
) -> str:
    sections = [
        ("Per loop", loop_table(mutants, wall_s)),
        ("Summary: which check catches which bugs", summary(mutants)),
        ("Per check", check_table(mutants)),
        ("Checks by category (judged mutants caught)", matrix(mutants)),
        ("Per operator", operator_table(mutants)),
        ("Bugs no check catches (judged, not caught by any check)", uncaught(mutants)),
        (
            "Killed, but by no check (a crash under a test, or the test's plumbing)",
            other_kills(mutants),
        ),
    ]
    if groups:
        sections.insert(2, ("Groups of tests", grouped(mutants, groups)))
    if with_unjudged:
        sections.append(("Ran, but not judged (no verdict counted)", unjudged(mutants)))
    parts = [*header, ""]
    for title, cells in sections:
        body = markdown_table(cells) if len(cells) > 1 else "None."
        parts += [f"### {title}", "", body, ""]
    return "\n".join(parts)


# -- running ----------------------------------------------------------------------------------


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
