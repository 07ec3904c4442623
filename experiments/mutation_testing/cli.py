"""``trainwreck test``: run the project's tests against every mutant of the named files.

    trainwreck test --mutate src/pkg/train.py [--mutate src/pkg/model.py] [--operators a,b]
        [--workers N] [--since GIT_REF] [--fail-under SCORE] [--out DIR] [-- COMMAND...]

From the project's folder; COMMAND defaults to ``python -m pytest -x -q``. Exit status 0,
or 1 when the score is below ``--fail-under`` or the unmutated command fails; 2 for a
mistake in the command line; 130 on Ctrl-C, 143 on SIGTERM, with every run ended.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from experiments.cli_support import Parser, UserError
from experiments.mutation_testing import command as commands
from experiments.mutation_testing import discovery, output, report
from experiments.mutation_testing.baseline import FAILED, BaselineFailed
from experiments.mutation_testing.outcome import Row

TERMINATED = 143
DEFAULT_OUT = "results/mutation-testing"


class Terminated(BaseException):
    """SIGTERM, raised where the session is, so that its cleanup runs."""


def build_parser() -> Parser:
    parser = Parser(
        prog="trainwreck test",
        description="Would your tests catch a training bug? Run them against each mutant.",
        epilog="Give the test command after --; default: python -m pytest -x -q",
    )
    parser.add_argument(
        "--mutate",
        action="append",
        required=True,
        metavar="FILE",
        help="a file of the project to mutate (repeatable)",
    )
    parser.add_argument(
        "--operators",
        action="append",
        metavar="A,B",
        help="only these operators (comma-separated, repeatable; default: all)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="runs at once (default: the cores this process may use)",
    )
    parser.add_argument("--since", metavar="GIT_REF", help="only mutants of lines changed since")
    parser.add_argument(
        "--fail-under",
        type=float,
        metavar="SCORE",
        help="exit 1 when the score (percent, 0-100) is lower",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help=f"results folder, with the cache (default: {DEFAULT_OUT}, which git ignores)",
    )
    parser.add_argument(
        "--timeout-factor",
        type=float,
        default=4.0,
        help="a mutant's deadline: this times the baseline's time, plus 5 s",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="a new interpreter per mutant instead of a fork (slower)",
    )
    parser.add_argument(
        "--cold-project",
        action="store_true",
        help="each mutant's child imports the project and collects the tests itself "
        "(default: forked from a process that did both once)",
    )
    parser.add_argument(
        "--all-tests",
        action="store_true",
        help="run every test for every mutant (no coverage-based selection)",
    )
    return parser


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    argv = list(argv)
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []


def parse_operators(specs: Sequence[str] | None) -> list:
    """``a,b`` or ``scale_lr:factor=0.01,drop_zero_grad``: a comma followed by ``k=v``
    continues the previous operator's parameters."""
    from mutations.registry import all_variants, resolve

    if not specs:
        return all_variants()
    names: list[str] = []
    for spec in specs:
        for piece in filter(None, (part.strip() for part in spec.split(","))):
            if names and "=" in piece and ":" not in piece and "(" not in piece:
                names[-1] += "," + piece
            else:
                names.append(piece)
    try:
        return [resolve(name) for name in names]
    except (KeyError, ValueError) as error:
        raise UserError(f"--operators: {str(error).strip(chr(34) + chr(39))}") from None


def test_main(argv: Sequence[str]) -> int:
    own, command_argv = split_command(argv)
    args = build_parser().parse_args(own)
    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers must be at least 1, got {args.workers}")
    if args.fail_under is not None and not 0 <= args.fail_under <= 100:
        raise UserError(f"--fail-under is a percentage from 0 to 100, got {args.fail_under}")
    if args.timeout_factor <= 0:
        raise UserError(f"--timeout-factor must be positive, got {args.timeout_factor}")
    root = Path.cwd().resolve()
    command = commands.parse(command_argv)
    operators = parse_operators(args.operators)
    targets = discovery.targets(root, args.mutate)
    changed = None
    if args.since:
        from experiments.mutation_testing.since import changed_lines

        found = changed_lines(root, args.since, [Path(target.path) for target in targets])
        changed = {target.name: found[Path(target.path)] for target in targets}
    jobs = discovery.jobs(targets, operators, changed)
    out = (root / (args.out or DEFAULT_OUT)).resolve()
    if not jobs:
        print(
            "no mutants: "
            + (
                "no changed line has a site"
                if args.since
                else "no operator has a site in these files"
            ),
            file=sys.stderr,
        )
        return 0
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _session(args, root, out, command, targets, jobs)
    except Terminated:
        print("trainwreck test: terminated", file=sys.stderr)
        return TERMINATED
    except BaselineFailed as error:
        print(f"trainwreck test: {error}", file=sys.stderr)
        return FAILED
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(*_: object) -> None:
    raise Terminated


def _session(args, root, out, command, targets, jobs) -> int:
    from experiments.harness import workdir
    from experiments.mutation_testing import session

    workdir.remove_stale()
    options = session.Options(
        root=root,
        out=out,
        command=command,
        workers=args.workers or session.default_workers(),
        timeout_factor=args.timeout_factor,
        fresh=args.fresh,
        select_tests=not args.all_tests,
        warm_project=not args.cold_project,
    )
    made = not args.out and output.ignored_by_git(out)
    done = session.run(options, targets, jobs, progress=_progress)
    rows = done.rows
    print(report.terminal(rows, jobs))
    paths = output.write(out, rows, jobs, command.text(), done.notes)
    cached = sum(row.cached for row in rows)
    print(
        f"\n{len(rows)} mutants: {done.ran} run, {cached} cached, in {done.wall_s:.1f} s; "
        f"{', '.join(path.name for path in paths)} in {out}",
        file=sys.stderr,
    )
    if made:
        print("(a new folder, which git ignores: it holds its own .gitignore)", file=sys.stderr)
    print(report.summary_line(rows))
    if args.fail_under is None:
        return 0
    passed, line = report.fail_under(rows, args.fail_under)
    print(line)
    return 0 if passed else 1


def _progress(row: Row, done: int, total: int) -> None:
    print(f"[{done}/{total}] {row.status:<9} {row.identity}", file=sys.stderr, flush=True)
