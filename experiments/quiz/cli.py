"""``trainwreck quiz ...``: the entry point the main CLI hands ``argv`` to.

    trainwreck quiz [--loop NAME] [--bugs K] [--seed S] [--level L] [--out DIR] [--reveal]
    trainwreck quiz answer DIR
    trainwreck quiz grade DIR (--lines 12,31,40 | --answers FILE)
    trainwreck quiz interactions [--loop NAME] [--results-dir DIR]

A user mistake (unknown loop, bad bug count, non-empty folder, no key) prints one line
and returns 2 before anything is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from experiments.cli_support import Parser, guarded
from experiments.quiz.draw import LEVELS, MAX_BUGS, MIN_BUGS, QuizError
from experiments.symptoms.reference import MIN_SPREAD_SEEDS

PROG = "trainwreck quiz"


def quiz_main(argv: Sequence[str]) -> int:
    argv = list(argv)
    commands = {"answer": _answer, "grade": _grade, "interactions": _interactions}
    if argv and argv[0] in commands:
        return guarded(PROG, commands[argv[0]], argv[1:])
    return guarded(PROG, _make, argv)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--loop", default="mlp_digits", help="a reference loop (configs/loop)")
    parser.add_argument(
        "--results-dir",
        default="results",
        type=Path,
        help="harness cache and catalog (default: results)",
    )
    parser.add_argument("--epochs", type=int, help="epochs per run (default: the loop config's)")
    parser.add_argument(
        "--seeds", type=int, default=3, help="training seeds per script (default 3)"
    )
    parser.add_argument("--workers", type=int, help="runs at once (default: all cores)")


def _check_counts(epochs: int | None, workers: int | None) -> None:
    if epochs is not None and epochs < 1:
        raise QuizError(f"--epochs must be at least 1, got {epochs}")
    if workers is not None and workers < 1:
        raise QuizError(f"--workers must be at least 1, got {workers}")


def _seeds(count: int) -> tuple[int, ...]:
    if count < MIN_SPREAD_SEEDS:
        raise QuizError(
            f"--seeds must be at least {MIN_SPREAD_SEEDS} (symptoms are judged against the "
            f"spread of {MIN_SPREAD_SEEDS} or more reference seeds), got {count}"
        )
    return tuple(range(count))


def _make(argv: list[str]) -> int:
    parser = Parser(prog=PROG, description="Write a practice training loop with several bugs.")
    _common(parser)
    parser.add_argument("--bugs", type=int, default=3, help=f"{MIN_BUGS}-{MAX_BUGS} (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="which quiz (default 0)")
    parser.add_argument("--level", choices=LEVELS, default="medium")
    parser.add_argument(
        "--out", type=Path, help="folder to create (default quiz-LOOP-LEVEL-KbSEED)"
    )
    parser.add_argument("--reveal", action="store_true", help="print the answer key at the end")
    args = parser.parse_args(argv)
    _check_counts(args.epochs, args.workers)
    from experiments.quiz.folder import QuizRequest, make_quiz

    out = args.out or Path(f"quiz-{args.loop}-{args.level}-{args.bugs}b{args.seed}")
    request = QuizRequest(
        loop=args.loop,
        bugs=args.bugs,
        seed=args.seed,
        level=args.level,
        out=out,
        results_dir=args.results_dir,
        epochs=args.epochs,
        seeds=_seeds(args.seeds),
        workers=args.workers,
    )
    folder = make_quiz(request, progress=lambda m: print(f"[trainwreck] {m}", file=sys.stderr))
    print(f"[trainwreck] wrote {folder}/ (practice.py, index.html, curves.png)", file=sys.stderr)
    if args.reveal:
        return _answer([str(folder)])
    print(f"open {folder / 'index.html'}; then: {PROG} grade {folder} --lines L1,L2,...")
    return 0


def _answer(argv: list[str]) -> int:
    parser = Parser(prog=f"{PROG} answer", description="Print a quiz's answer key.")
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    from experiments.quiz.key import ANSWER_MARKDOWN, key_markdown, read_key

    text = key_markdown(read_key(args.folder))
    (args.folder / ANSWER_MARKDOWN).write_text(text, encoding="utf-8")
    print(text)
    return 0


def _grade(argv: list[str]) -> int:
    parser = Parser(prog=f"{PROG} grade", description="Score an answer against the key.")
    parser.add_argument("folder", type=Path)
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--lines", help="line numbers, most harmful bug first: 12,31,40")
    given.add_argument("--answers", type=Path, help="a file: one 'LINE [bug name]' per line")
    args = parser.parse_args(argv)
    from experiments.quiz.grade import grade, grade_markdown, parse_answers_file, parse_lines
    from experiments.quiz.key import read_key

    key = read_key(args.folder)
    if args.lines is not None:
        answers = parse_lines(args.lines)
    else:
        try:
            answers = parse_answers_file(args.answers.read_text(encoding="utf-8"))
        except OSError as error:
            raise QuizError(f"{args.answers}: {error.strerror}") from None
        except UnicodeDecodeError as error:
            raise QuizError(
                f"{args.answers}: not UTF-8 text (byte {error.start}); save it as UTF-8, "
                "one 'LINE [bug name]' per line"
            ) from None
    print(grade_markdown(grade(key, answers)), end="")
    return 0


def _interactions(argv: list[str]) -> int:
    parser = Parser(
        prog=f"{PROG} interactions",
        description="Measure how pairs of bugs combine (masks, amplifies, adds, independent).",
    )
    _common(parser)
    parser.add_argument(
        "--quizzes",
        type=int,
        default=5,
        help="pairs from the quizzes of seeds 0..N-1 at each level (default 5)",
    )
    parser.add_argument("--bugs", type=int, default=3, help="bugs per quiz the pairs come from")
    parser.add_argument("--no-classic", action="store_true", help="skip the classic five bugs")
    args = parser.parse_args(argv)
    _check_counts(args.epochs, args.workers)
    if args.quizzes < 0:
        raise QuizError(f"--quizzes must be 0 or more, got {args.quizzes}")
    from experiments.quiz.interactions import InteractionRequest, run_interactions

    request = InteractionRequest(
        loop=args.loop,
        results_dir=args.results_dir,
        epochs=args.epochs,
        seeds=_seeds(args.seeds),
        quizzes=args.quizzes,
        bugs=args.bugs,
        classic=not args.no_classic,
        workers=args.workers,
    )
    written = run_interactions(
        request, progress=lambda m: print(f"[trainwreck] {m}", file=sys.stderr)
    )
    print(f"[trainwreck] wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    catalog = Path(args.results_dir) / "catalog"
    if (catalog / "sweep.json").is_file():
        from experiments.catalog.report_cmd import report_main

        # Put the new table into study.md and report.html beside the catalog's own.
        return report_main([str(args.results_dir)])
    return 0


if __name__ == "__main__":
    sys.exit(quiz_main(sys.argv[1:]))
