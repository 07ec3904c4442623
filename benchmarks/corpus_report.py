"""Prints the corpus measurement of ``bench_sites.py --corpus DIR`` (definitions: corpus_sites)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

import corpus_sites as cs


def _ratio(pair: tuple[int, int]) -> str:
    hits, total = pair
    return f"{hits / total:.1%}" if total else "n/a"


def _recall(tally: cs.Tally) -> str:
    return _ratio((tally.matched, tally.expected))


HEADER = (
    f"{'':34} {'mut':>4} {'ok':>4} {'eval':>4} {'off':>4} {'diff':>4} {'false':>5} {'err':>3}"
    f" {'dp-prec':>7} {'overall':>7} {'exp':>4} {'miss':>4} {'recall':>6}"
)


def _row(name: str, t: cs.Tally) -> str:
    n = sum(t.labels.values())
    k = t.labels
    return (
        f"{name:34} {n:4d} {k['ok']:4d} {k['eval_only']:4d} {k['off_path']:4d} "
        f"{k['different']:4d} {k['false']:5d} {t.errors:3d} {_ratio(t.default_path):>7} "
        f"{_ratio(t.overall):>7} {t.expected:4d} {t.expected - t.matched:4d} {_recall(t):>6}"
    )


def summary(m: cs.Measurement, n_scripts: int, n_repos: int, n_mutants: int) -> list[str]:
    t = m.total()
    k = t.labels
    return [
        f"corpus: {n_scripts} scripts from {n_repos} repositories, {n_mutants} mutants "
        f"({len(m.unlabelled)} unlabelled, {len(m.stale)} with a stale label), "
        f"{len(m.errors)} engine errors, {len(m.missing_scripts)} scripts not readable",
        "labels: " + ", ".join(f"{kind} {k[kind]}" for kind in cs.LABEL_KINDS),
        f"default-path precision {_ratio(t.default_path)} ({t.default_path[0]}/"
        f"{t.default_path[1]}); overall precision {_ratio(t.overall)} ({t.overall[0]}/"
        f"{t.overall[1]}); recall {_recall(t)} ({t.matched}/{t.expected} expected sites)",
    ]


def problems(m: cs.Measurement) -> list[str]:
    lines = [f"not readable: {text}" for text in m.missing_scripts]
    lines += [f"engine error: {script}: {text}" for script, text in m.errors]
    lines += [f"unlabelled: {x.script}:{x.line} {x.identity} {x.diff_hash}" for x in m.unlabelled]
    lines += [f"stale label: {x.script}:{x.line} {x.identity} {x.diff_hash}" for x in m.stale]
    lines += [f"label without a mutant: {x.script}:{x.line} {x.identity}" for x in m.orphans]
    lines += [
        f"ok but no expected entry: {x.script}:{x.line} {x.operator}" for x in m.unexpected_ok
    ]
    lines += [
        f"expected entry {where} matched only by {m.labels_of[x.key].label}: "
        f"{x.script}:{x.line} {x.operator}"
        for x, where in m.mislabelled
    ]
    return lines


def details(m: cs.Measurement) -> list[str]:
    lines = []
    for label in sorted(m.labels_of.values(), key=lambda x: (x.script, x.line, x.operator)):
        if label.label in ("different", "false"):
            lines.append(
                f"{label.label:9} {label.script}:{label.line} {label.operator}: {label.reason}"
            )
    lines += [f"missed    {s}:{e.describe()} {op}" for s, op, e in m.missed]
    return lines


def todo_rows(m: cs.Measurement) -> str:
    """CSV rows (empty label) for every unlabelled or stale mutant, to fill in by hand."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for x in m.unlabelled + m.stale:
        writer.writerow([x.script, x.identity, x.diff_hash, x.line, x.operator, "", ""])
    return out.getvalue()


def show(mutants: list[cs.CorpusMutant]) -> str:
    """Each mutant's diff under a line naming it, for reading and labelling."""
    parts = []
    for x in mutants:
        parts.append(f"### {x.script}:{x.line} [{x.context}] {x.identity} {x.diff_hash}")
        parts.append(x.diff.rstrip("\n"))
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_sites.py --corpus DIR")
    parser.add_argument("--corpus", type=Path, required=True, help="folder of git mirrors")
    parser.add_argument("--details", action="store_true", help="every different/false/missed")
    parser.add_argument("--json", action="store_true", help="per-operator table as JSON")
    parser.add_argument("--unlabelled", action="store_true", help="diffs of unlabelled mutants")
    parser.add_argument("--todo", action="store_true", help="CSV rows for unlabelled mutants")
    parser.add_argument("--script", action="append", help="only these scripts (by name)")
    parser.add_argument("--check", action="store_true", help="exit 1 on any problem")
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"--corpus {args.corpus}: no such folder (give the fetch tool's mirror folder)")
        return 2
    scripts = cs.load_corpus()
    if args.script:
        unknown = sorted(set(args.script) - {s.name for s in scripts})
        if unknown:
            print(f"--script: unknown {', '.join(unknown)}; see benchmarks/corpus.toml")
            return 2
        scripts = [s for s in scripts if s.name in args.script]
    mutants, errors, missing = cs.collect(scripts, args.corpus)
    m = cs.measure(mutants, errors, cs.load_labels(), cs.load_expected())
    m.missing_scripts = missing
    if args.todo:
        sys.stdout.write(todo_rows(m))
        return 0
    if args.unlabelled:
        print(show(m.unlabelled + m.stale))
        return 0
    by_op = m.by(1)
    if args.json:
        print(json.dumps({op: _as_dict(t) for op, t in by_op.items()}, indent=1))
        return 0
    n_mutants = sum(len(v) for v in mutants.values())
    repos = {s.repository for s in scripts}
    print("\n".join(summary(m, len(scripts), len(repos), n_mutants)))
    for title, table in (("operator", by_op), ("script", m.by(0))):
        print(f"\nper {title}:\n{HEADER}")
        for name, tally in table.items():
            if sum(tally.labels.values()) or tally.expected or tally.errors:
                print(_row(name, tally))
    found_problems = problems(m)
    if found_problems:
        print(f"\n{len(found_problems)} problems:")
        print("\n".join(found_problems))
    if args.details:
        print("\n" + "\n".join(details(m)))
    return 1 if args.check and found_problems else 0


def _as_dict(t: cs.Tally) -> dict:
    return {
        "labels": dict(t.labels),
        "engine_errors": t.errors,
        "default_path_precision": _ratio(t.default_path),
        "overall_precision": _ratio(t.overall),
        "expected": t.expected,
        "matched": t.matched,
        "recall": _recall(t),
    }
