"""Entry points for ``trainwreck lint FILE...`` and ``trainwreck bench ...``.

Plain functions taking argv and returning an exit status, so the lead can wire them into
the ``trainwreck`` command: exit 0 clean / done, 1 findings (lint), 2 user errors (one
line on stderr, never a traceback).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from experiments.cli_support import Parser, UserError, guarded

# Our own code in the styles of common public examples: clean code for static detectors.
STYLES_DIR = Path(__file__).resolve().parents[2] / "tests" / "styles"

# -- lint ------------------------------------------------------------------------------------


def lint_main(argv: Sequence[str] | None = None) -> int:
    """``trainwreck lint FILE...``: 0 when clean, 1 when there are findings, 2 on user errors."""
    return guarded("trainwreck lint", _lint, argv)


def _lint(argv: Sequence[str] | None) -> int:
    parser = Parser(
        prog="trainwreck lint", description="Lint PyTorch training loops (TW### codes)."
    )
    parser.add_argument("files", nargs="*", metavar="FILE")
    parser.add_argument("--select", help="comma-separated rule codes or prefixes (TW1,TW203)")
    parser.add_argument("--list-rules", action="store_true", help="print the rules and exit")
    parser.add_argument(
        "--min-confidence",
        choices=("high", "medium", "low"),
        default="medium",
        help="report rules of this confidence or higher (default: medium; low rules depend "
        "on data the linter cannot see)",
    )
    args = parser.parse_args(argv)
    from experiments.bench.lint import RULES, lint_source, rules_at
    from mutator.engine import MutationError

    rules = rules_at(args.min_confidence)
    if args.select:
        prefixes = [p.strip().upper() for p in args.select.split(",") if p.strip()]
        # An explicit selection is honoured whatever the rules' confidence.
        rules = tuple(rule for rule in RULES if any(rule.code.startswith(p) for p in prefixes))
        if not rules:
            raise UserError(f"--select {args.select!r} matches no rule")
    if args.list_rules:
        for rule in rules:
            print(
                f"{rule.code}  {rule.category:<10}  {rule.confidence:<6}  {rule.summary}"
                f"  [{', '.join(rule.operators) or '-'}]"
            )
        return 0
    if not args.files:
        raise UserError("give at least one FILE")
    texts = []
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            raise UserError(f"{name}: no such file")
        try:
            texts.append((name, path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            raise UserError(f"{name}: not UTF-8 text") from None
    found = 0
    for name, text in texts:
        try:
            findings = lint_source(text, name, rules)
        except MutationError as error:
            raise UserError(str(error)) from None
        for finding in findings:
            print(finding.format())
        found += len(findings)
    return 1 if found else 0


# -- bench -----------------------------------------------------------------------------------


def bench_main(argv: Sequence[str] | None = None) -> int:
    """``trainwreck bench [--detector NAME ...]``, ``bench export DIR``, ``bench detectors``,
    ``bench install-tool NAME``."""
    return guarded("trainwreck bench", _bench, argv)


def _bench(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "export":
        return _export(argv[1:])
    if argv and argv[0] == "detectors":
        return _list_detectors()
    if argv and argv[0] == "install-tool":
        return _install_tool(argv[1:])
    if argv and argv[0] == "strength":
        from experiments.bench.strength import strength_main

        return strength_main(argv[1:])
    return _score(argv)


def _score(argv: list[str]) -> int:
    parser = Parser(
        prog="trainwreck bench", description="Score bug detectors against known mutants."
    )
    parser.add_argument(
        "--detector", action="append", metavar="NAME", help="repeatable; see `bench detectors`"
    )
    parser.add_argument(
        "--results-dir", default="results", help="stored runs; the leaderboard goes to DIR/bench"
    )
    parser.add_argument(
        "--loops", nargs="+", metavar="LOOP", help="reference loops by name (default: all)"
    )
    parser.add_argument(
        "--operator", action="append", metavar="NAME", help="only these operators (source cases)"
    )
    parser.add_argument(
        "--limit", type=int, help="at most this many mutant cases per loop (a quick look)"
    )
    parser.add_argument(
        "--seeds", type=int, default=1, help="clean source cases per loop, one per seed"
    )
    parser.add_argument(
        "--epochs", type=int, default=1, help="epochs when a detector runs a script"
    )
    parser.add_argument(
        "--timeout", type=float, help="seconds per case (default: the detector's own)"
    )
    parser.add_argument("--line-tolerance", type=int, default=0, help="localization slack in lines")
    parser.add_argument(
        "--clean-code",
        default=str(STYLES_DIR),
        metavar="DIR",
        help="unmutated scripts (*.py) that static detectors must not flag (default: tests/styles)",
    )
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="detector options"
    )
    _real_options(parser)
    args = parser.parse_args(argv)
    if not args.detector:
        raise UserError(
            "give --detector NAME (repeatable); `trainwreck bench detectors` lists them"
        )
    real = _real_setup(args)
    from experiments.bench import leaderboard, score
    from experiments.bench.api import get_detector
    from experiments.bench.corpus import reference_loops, run_cases, source_cases
    from experiments.bench.styles import style_cases
    from experiments.bench.validity import mutant_validity
    from experiments.progress import progress_printer

    options = _options(args.option)
    try:
        detectors = [get_detector(name, **options.get(name, {})) for name in args.detector]
        loops = reference_loops(args.loops)
    except (KeyError, ValueError, TypeError) as error:
        raise UserError(str(error).strip("'\"")) from None
    if not loops:
        raise UserError("no reference loops found")
    results_dir = Path(args.results_dir)
    clean_code = Path(args.clean_code)
    if not clean_code.is_dir():
        raise UserError(
            f"--clean-code {args.clean_code}: not a folder (give one with *.py scripts)"
        )
    reports = []
    training: dict[str, list] = {}  # the cases a learned detector is fitted on for real faults
    # Mutants that are not the bug they claim are no ground truth (bench/validity.py).
    validity = mutant_validity(results_dir)
    for detector in detectors:
        if detector.inputs == "source":
            cases = _source_cases(source_cases, loops, args)
            if detector.kind in ("static", "external"):  # reads code, never runs it
                cases += style_cases(clean_code)
        else:
            cases = run_cases(results_dir, args.loops)
            if not cases:
                print(f"{detector.name}: no stored runs under {results_dir}/runs", file=sys.stderr)
        kept = [case for case in cases if validity.keeps(case)]
        if len(kept) < len(cases):
            print(
                f"{detector.name}: {len(cases) - len(kept)} cases of mutants that are not their "
                "bug left out of the ground truth",
                file=sys.stderr,
            )
        cases = kept
        training[detector.name] = cases
        report = score.run_detector(detector, cases, args.timeout, progress_printer(detector.name))
        reports.append(report)
    written = leaderboard.write_leaderboard(reports, results_dir / "bench", args.line_tolerance)
    print(
        leaderboard.markdown_table(
            leaderboard.leaderboard_rows(reports, args.line_tolerance),
            leaderboard.LEADERBOARD_COLUMNS,
        )
    )
    print("\n" + validity.section())
    if real is not None:
        from experiments.bench.real.bench import score_real

        text, files = score_real(
            real,
            detectors,
            reports,
            training,
            results_dir,
            args.timeout,
            args.line_tolerance,
            progress_printer,
        )
        print(text)
        written += files
    print(validity.line(), file=sys.stderr)
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 0


def _real_options(parser: Parser, seeds: bool = True) -> None:
    parser.add_argument(
        "--real-faults",
        action="store_true",
        help="the real faults of the replay set too: scored beside the mutants, or in the "
        "bundle (docs/real-faults.md)",
    )
    parser.add_argument(
        "--mirrors",
        metavar="DIR",
        help="git mirrors of the replay set's repositories, DIR/<owner>+<name>/repo (default: "
        "$TRAINWRECK_MIRRORS, else /work/.mirror where it exists)",
    )
    parser.add_argument(
        "--real-set", metavar="FILE", help="replay set (default: benchmarks/real_faults.toml)"
    )
    if seeds:
        parser.add_argument(
            "--real-seeds", type=int, default=3, help="seeds per offline run of a real fault"
        )


def _real_setup(args):
    """The checked real-fault options (None without --real-faults); UserError when wrong."""
    if not args.real_faults:
        return None
    from experiments.bench.real.bench import prepare

    try:
        return prepare(args.mirrors, args.real_set, getattr(args, "real_seeds", 1))
    except ValueError as error:
        raise UserError(str(error)) from None


def _source_cases(build, loops, args):
    from mutations.registry import all_variants, resolve

    operators = None
    if args.operator:
        try:
            operators = [resolve(spec) for spec in args.operator]
        except (KeyError, ValueError) as error:
            raise UserError(str(error).strip("'\"")) from None
    cases, problems = build(loops, operators or all_variants(), epochs=args.epochs)
    for problem in problems:
        print(f"skipped: {problem}", file=sys.stderr)
    if args.limit is not None:
        kept, per_loop = [], {}
        for case in cases:
            if not case.truth.clean:
                per_loop[case.loop] = per_loop.get(case.loop, 0) + 1
                if per_loop[case.loop] > args.limit:
                    continue
            kept.append(case)
        cases = kept
    if args.seeds > 1:
        from dataclasses import replace

        from experiments.bench.corpus import loop_argv

        extra = []
        for case in cases:
            if case.truth.clean and case.script is not None:
                for seed in range(1, args.seeds):
                    script = replace(case.script, argv=loop_argv(args.epochs, seed), seed=seed)
                    extra.append(
                        replace(
                            case, case_id=f"{case.case_id}/seed{seed}", script=script, seed=seed
                        )
                    )
        for case in cases:
            if case.truth.clean:
                case.seed = 0
        cases = cases + extra
    return cases


def _options(items: list[str]) -> dict[str, dict[str, str]]:
    """``--option trainwreck-rules.patience=3`` -> {"trainwreck-rules": {"patience": "3"}}."""
    options: dict[str, dict[str, str]] = {}
    for item in items:
        key, eq, value = item.partition("=")
        name, dot, setting = key.rpartition(".")
        if not eq or not dot:
            raise UserError(f"--option {item!r}: expected DETECTOR.KEY=VALUE")
        options.setdefault(name, {})[setting] = value
    return options


def _export(argv: list[str]) -> int:
    parser = Parser(
        prog="trainwreck bench export", description="Write a self-contained benchmark bundle."
    )
    parser.add_argument("out", metavar="DIR")
    parser.add_argument("--results-dir", help="include the stored runs of this results folder")
    parser.add_argument("--loops", nargs="+", metavar="LOOP")
    _real_options(parser, seeds=False)
    args = parser.parse_args(argv)
    from experiments.bench.corpus import reference_loops
    from experiments.bench.export import export_bundle

    setup = _real_setup(args)
    real = None
    if setup is not None:
        from experiments.bench.real.cases import collect

        real = collect(setup.mirrors, setup.replay_set)
    try:
        loops = reference_loops(args.loops)
        counts = export_bundle(
            Path(args.out), loops, Path(args.results_dir) if args.results_dir else None, real=real
        )
    except (KeyError, FileExistsError) as error:
        raise UserError(str(error).strip("'\"")) from None
    print(f"wrote {args.out}: " + ", ".join(f"{k} {v}" for k, v in counts.items()), file=sys.stderr)
    return 0


def _list_detectors() -> int:
    from experiments.bench.api import detector_classes

    for name, cls in detector_classes().items():
        reason = cls().unavailable()
        state = f"unavailable: {reason[:90]}" if reason else "ready"
        print(f"{name:<24} {cls.kind:<9} {cls.summary}  [{state}]")
    return 0


def _install_tool(argv: list[str]) -> int:
    from experiments.bench.external import TOOLS, install

    if len(argv) != 1 or argv[0] not in TOOLS:
        raise UserError(f"give one tool: {', '.join(TOOLS)}")
    done = install(argv[0])
    print(f"installed {done['requirement']} in {done['venv']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(bench_main())
