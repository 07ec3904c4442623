"""trainwreck: inject training bugs into PyTorch scripts and measure their symptoms.

Static commands (``operators``, ``mutate``) import libcst only, so they answer fast.
Commands that run training import the harness lazily.

User mistakes end with one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from experiments.cli_support import Parser, UserError, guarded

# -- operators ---------------------------------------------------------------------------


def cmd_operators(args: argparse.Namespace) -> int:
    from mutations.registry import operator_classes
    from mutator.operator import CATEGORIES

    if args.category and args.category not in CATEGORIES:
        raise UserError(
            f"unknown category {args.category!r}; choose one of: {', '.join(CATEGORIES)}"
        )
    rows = [
        {
            "name": cls.name,
            "category": cls.category,
            "expected": cls.expected,
            "summary": cls.summary,
            "parameters": {key: spec.default for key, spec in cls.parameters.items()},
            "variants": [dict(variant) for variant in cls.variants],
        }
        for cls in operator_classes().values()
        if not args.category or cls.category == args.category
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max((len(row["name"]) for row in rows), default=4)
    for row in rows:
        print(
            f"{row['name']:<{width}}  {row['category']:<10}  {row['expected']:<15}  {row['summary']}"
        )
    print(f"\n{len(rows)} operators", file=sys.stderr)
    return 0


# -- mutate ------------------------------------------------------------------------------


def _load_operators(specs: Sequence[str] | None) -> list:
    from mutations.registry import all_variants, resolve

    if not specs:
        return all_variants()
    operators = []
    for spec in specs:
        try:
            operators.append(resolve(spec))
        except (KeyError, ValueError) as error:
            raise UserError(str(error).strip("'\"")) from None
    return operators


def _read_source(path: str, target: str | None = None):
    from mutator.engine import MutationError, SourceFile
    from mutator.project import Project

    file = Path(path)
    if not file.exists():
        raise UserError(f"{path}: no such file")
    if not file.is_file():
        raise UserError(f"{path}: not a file (give a Python training script)")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text (give a Python training script)") from None
    try:
        # The files around it are its project: an imported model's classes are read there.
        where = file.resolve().as_posix()
        return SourceFile(text, target or file.name, Project.on_disk(), where)
    except MutationError as error:
        # The engine names the file by its basename; the user wants the path they typed.
        raise UserError(str(error).replace(file.name, path, 1)) from None


def cmd_mutate(args: argparse.Namespace) -> int:
    """One file as always; several files (``model.py train.py``): each in turn, identities
    naming each file relative to the first one's folder, ``--out`` one folder for all."""
    files = list(args.files)
    if args.rejected and (args.diff or args.out or args.order != 1):
        raise UserError("--rejected lists sites one per line: use it with --list alone")
    if len(files) == 1:
        args.file = files[0]
        return _mutate_file(args)
    if args.order != 1:
        raise UserError("--order > 1 takes one file (bugs combine within a file)")
    if args.out:
        return _write_several(files, _load_operators(args.operator), Path(args.out))
    for file in files:
        args.file = file
        _mutate_file(args, target=_project_name(file, files))
    return 0


def _project_name(file: str, files: Sequence[str]) -> str:
    """A file's name in identities and listings: relative to the current folder when every
    file is inside it (``callbacks/lambda_.py``), else to the folder holding them all;
    never ``../callbacks/lambda_.py``."""
    import os

    paths = [Path(name).resolve() for name in files]
    here = Path.cwd().resolve()
    if all(path.is_relative_to(here) for path in paths):
        base = here
    else:
        base = Path(os.path.commonpath([path.parent for path in paths]))
    return Path(file).resolve().relative_to(base).as_posix()


def _write_several(files: list[str], operators: list, out: Path) -> int:
    from experiments.files import check_new_folder, staged_folder

    sources = [_read_source(file, _project_name(file, files)) for file in files]
    out = out.resolve()
    if any(out == Path(file).resolve().parent for file in files):
        raise UserError(f"--out {out} is an input's own folder; choose a separate folder")
    try:
        check_new_folder(out)
    except FileExistsError as error:
        raise UserError(f"--out {error}") from None
    count = 0
    with staged_folder(out) as staging:
        manifest: dict = {"sources": files, "mutants": []}
        for file, source in zip(files, sources):
            for site in source.find_sites(operators):
                mutant = source.apply([site])
                count += 1
                filename = f"m{count:04d}_{site.operator.name}.py"
                (staging / filename).write_text(mutant.source, encoding="utf-8")
                entry = {"file": filename, "source": file, "target": source.target}
                manifest["mutants"].append({**entry, **mutant.manifest_entry()})
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    print(
        f"wrote {count} mutants of {len(files)} files and manifest.json to {out}", file=sys.stderr
    )
    return 0


def _mutate_file(args: argparse.Namespace, target: str | None = None) -> int:
    from mutator.engine import choose_higher_order

    operators = _load_operators(args.operator)
    source = _read_source(args.file, target)
    if args.rejected:
        return _list_with_rejected(args, source, operators)
    sites = source.find_sites(operators)
    if not sites:
        names = "the chosen operators" if args.operator else "any operator"
        print(f"{args.file}: no sites for {names}; nothing to mutate", file=sys.stderr)
        return 0
    if args.order == 1:
        groups = [(site,) for site in sites]
    else:
        groups = choose_higher_order(sites, args.order, args.count, args.seed)
        if not groups:
            raise UserError(
                f"{args.file}: cannot combine {args.order} non-overlapping sites of different "
                f"operators (found {len(sites)} sites of {len({s.operator.name for s in sites})} operators)"
            )
    if args.out:
        return _write_mutants(source, groups, Path(args.out), Path(args.file))
    if args.diff:
        for group in groups:
            mutant = source.apply(group)
            print(f"# {mutant.identity}  sha256:{mutant.sha256[:12]}")
            print(mutant.diff)
        return 0
    for group in groups:
        print(_listing(args.file, group))
    print(f"{len(groups)} mutants", file=sys.stderr)
    return 0


def _listing(path: str, group: Sequence) -> str:
    """flake8-style: ``path:line:col operators identity [contexts]``."""
    first = group[0]
    identity = "+".join(site.identity for site in group)
    names = "+".join(site.operator.label for site in group)
    contexts = "+".join(site.context for site in group)
    return f"{path}:{first.line}:{first.column + 1} {names} {identity} [{contexts}]"


def _list_with_rejected(args: argparse.Namespace, source, operators: list) -> int:
    """The sites and, among them in line order, the places the engine rejected with why."""
    survey = source.survey(operators)
    lines = [((site.line, site.column), _listing(args.file, (site,))) for site in survey.sites]
    lines += [((r.site.line, r.site.column), r.line(args.file)) for r in survey.rejected]
    for _, line in sorted(lines, key=lambda item: item[0]):
        print(line)
    print(f"{len(survey.sites)} mutants, {len(survey.rejected)} rejected", file=sys.stderr)
    return 0


def _write_mutants(source, groups, out: Path, input_path: Path) -> int:
    out = out.resolve()
    if out == input_path.resolve().parent:
        raise UserError(f"--out {out} is the input's own folder; choose a separate folder")
    from experiments.files import check_new_folder, staged_folder

    try:
        check_new_folder(out)
    except FileExistsError as error:
        raise UserError(f"--out {error}") from None
    with staged_folder(out) as staging:
        manifest = {"source": str(input_path), "target": source.target, "mutants": []}
        # Each mutant names its file too, as in a manifest of several files.
        for number, group in enumerate(groups, 1):
            mutant = source.apply(group)
            label = "+".join(site.operator.name for site in group)
            filename = f"m{number:04d}_{label}.py"
            (staging / filename).write_text(mutant.source, encoding="utf-8")
            entry = {"file": filename, "target": source.target}
            manifest["mutants"].append({**entry, **mutant.manifest_entry()})
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    print(f"wrote {len(groups)} mutants and manifest.json to {out}", file=sys.stderr)
    return 0


# -- entry point -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="trainwreck", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True

    operators = commands.add_parser("operators", help="list the mutation operators")
    operators.add_argument("--category", help="only this category")
    operators.add_argument("--json", action="store_true", help="machine-readable output")
    operators.set_defaults(handler=cmd_operators)

    mutate = commands.add_parser("mutate", help="find sites and build mutants of a script")
    mutate.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a Python training script, or several files of a project: train.py model.py (never modified)",
    )
    mutate.add_argument(
        "--operator",
        action="append",
        metavar="NAME",
        help="operator name, optionally with parameters: scale_lr:factor=0.01 (repeatable; default: all)",
    )
    mode = mutate.add_mutually_exclusive_group()
    mode.add_argument("--list", action="store_true", help="list mutants, flake8-style (default)")
    mode.add_argument("--diff", action="store_true", help="print each mutant's unified diff")
    mode.add_argument("--out", metavar="DIR", help="write mutant files and manifest.json to DIR")
    mutate.add_argument(
        "--rejected",
        action="store_true",
        help="with --list: also the places rejected as no site, each with its reason",
    )
    mutate.add_argument("--order", type=int, default=1, help="bugs per mutant, 1-5 (default 1)")
    mutate.add_argument("--count", type=int, default=10, help="higher-order mutants to draw")
    mutate.add_argument("--seed", type=int, default=0, help="seed for drawing higher-order mutants")
    mutate.set_defaults(handler=cmd_mutate)

    for name, (_, help_text) in DELEGATED.items():
        # Listed for --help; ``main`` hands their arguments over before argparse sees them.
        commands.add_parser(name, help=help_text, add_help=False)
    return parser


def _sweep(argv: Sequence[str]) -> int:
    from experiments.run import main as run_main

    run_main(list(argv))
    return 0


def _lint(argv: Sequence[str]) -> int:
    from experiments.bench.cli import lint_main

    return lint_main(list(argv))


def _bench(argv: Sequence[str]) -> int:
    from experiments.bench.cli import bench_main

    return bench_main(list(argv))


def _catalog(argv: Sequence[str]) -> int:
    from experiments.catalog.job import catalog_main

    return guarded("trainwreck catalog", catalog_main, argv)


def _report(argv: Sequence[str]) -> int:
    from experiments.catalog.report_cmd import report_main

    return guarded("trainwreck report", report_main, argv)


def _strength(argv: Sequence[str]) -> int:
    from experiments.strength.cli import strength_main

    return guarded("trainwreck strength", strength_main, argv)


def _test(argv: Sequence[str]) -> int:
    from experiments.mutation_testing.cli import test_main

    return guarded("trainwreck test", test_main, argv)


def _quiz(argv: Sequence[str]) -> int:
    from experiments.quiz.cli import quiz_main

    return quiz_main(list(argv))


# Commands that own their argument parsing: ``trainwreck NAME ARGS...`` -> handler(ARGS).
DELEGATED: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "catalog": (_catalog, "run the mutant sweep and write the symptom catalog (the main job)"),
    "report": (_report, "rebuild the catalog files from stored runs, without training"),
    "sweep": (_sweep, "run a Hydra sweep (same overrides as python -m experiments.run)"),
    "strength": (
        _strength,
        "the weakest setting of a parametric operator at which its bug shows",
    ),
    "quiz": (_quiz, "practice: a loop with several bugs, its curves, an answer key, grading"),
    "test": (_test, "would your tests catch it? run them against each mutant of your files"),
    "lint": (_lint, "lint training scripts for loop bugs (trainwreck-lint)"),
    "bench": (_bench, "score bug detectors against the mutants (leaderboard, export)"),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        handler, _ = DELEGATED[argv[0]]
        return guarded("trainwreck", handler, argv[1:])
    return guarded("trainwreck", _run, argv)


def _run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "order", 1) not in range(1, 6):
        raise UserError(f"--order must be between 1 and 5, got {args.order}")
    if getattr(args, "count", 1) < 1:
        raise UserError(f"--count must be at least 1, got {args.count}")
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
