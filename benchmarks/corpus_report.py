"""Prints the corpus measurement of ``bench_sites.py --corpus DIR`` (definitions: corpus_sites)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections import Counter
from pathlib import Path

import corpus_measure as cm
import corpus_sites as cs


def _ratio(pair: tuple[int, int]) -> str:
    hits, total = pair
    return f"{hits / total:.1%}" if total else "n/a"


def _recall(tally: cm.Tally) -> str:
    return _ratio((tally.matched, tally.expected))


HEADER = (
    f"{'':34} {'mut':>4} {'ok':>4} {'eval':>4} {'off':>4} {'diff':>4} {'false':>5} {'err':>3}"
    f" {'dp-prec':>7} {'overall':>7} {'exp':>4} {'miss':>4} {'recall':>6}"
)


def _row(name: str, t: cm.Tally) -> str:
    n = sum(t.labels.values())
    k = t.labels
    return (
        f"{name:34} {n:4d} {k['ok']:4d} {k['eval_only']:4d} {k['off_path']:4d} "
        f"{k['different']:4d} {k['false']:5d} {t.errors:3d} {_ratio(t.default_path):>7} "
        f"{_ratio(t.overall):>7} {t.expected:4d} {t.expected - t.matched:4d} {_recall(t):>6}"
    )


def summary(m: cm.Measurement, n_scripts: int, n_repos: int, n_mutants: int) -> list[str]:
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


def problems(m: cm.Measurement) -> list[str]:
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


def details(m: cm.Measurement) -> list[str]:
    lines = []
    for label in sorted(m.labels_of.values(), key=lambda x: (x.script, x.line, x.operator)):
        if label.label in ("different", "false"):
            lines.append(
                f"{label.label:9} {label.script}:{label.line} {label.operator}: {label.reason}"
            )
    lines += [f"missed    {s}:{e.describe()} {op}" for s, op, e in m.missed]
    return lines


def todo_rows(m: cm.Measurement) -> str:
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


def failure_kinds(m: cm.Measurement) -> list[str]:
    """Wrong mutants counted by (label, operator), then missed sites by operator."""
    wrong = Counter(
        (label.label, label.operator)
        for key, label in m.labels_of.items()
        if label.label in ("different", "false") and key in m.used
    )
    missed = Counter(op for _, op, _ in m.missed)
    lines = [f"  {label:9} {op}: {n}" for (label, op), n in sorted(wrong.items())]
    lines += [f"  missed    {op}: {n}" for op, n in sorted(missed.items())]
    return lines


def _report(m: cm.Measurement, scripts: list[cs.Script], mutants) -> list[str]:
    n_mutants = sum(len(mutants.get(s.name, [])) for s in scripts)
    repos = {s.repository for s in scripts}
    out = summary(m, len(scripts), len(repos), n_mutants)
    for title, table in (("operator", m.by(1)), ("script", m.by(0))):
        out.append(f"\nper {title}:\n{HEADER}")
        out += [
            _row(name, tally)
            for name, tally in table.items()
            if sum(tally.labels.values()) or tally.expected or tally.errors
        ]
    out.append("\nwrong mutants and missed sites, by label and operator:")
    out += failure_kinds(m) or ["  none"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_sites.py --corpus DIR")
    parser.add_argument("--corpus", type=Path, required=True, help="folder of git mirrors")
    parser.add_argument("--details", action="store_true", help="every different/false/missed")
    parser.add_argument("--json", action="store_true", help="per-operator table as JSON")
    parser.add_argument("--unlabelled", action="store_true", help="diffs of unlabelled mutants")
    parser.add_argument("--todo", action="store_true", help="CSV rows for unlabelled mutants")
    parser.add_argument("--script", action="append", help="only these scripts (by name)")
    parser.add_argument(
        "--split", choices=(*cs.SPLITS, "all"), default="all", help="one half (default: both)"
    )
    parser.add_argument("--draw", type=int, help="only the scripts of this held-out draw")
    parser.add_argument("--check", action="store_true", help="exit 1 on any problem")
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"--corpus {args.corpus}: no such folder (give the fetch tool's mirror folder)")
        return 2
    scripts, unknown = cs.select(cs.load_corpus(), args.script, args.split, args.draw)
    if unknown:
        print(f"--script: unknown {', '.join(unknown)}; see benchmarks/corpus.toml")
        return 2
    expected = cs.load_expected()
    # a script is measured once its expected sites are written (an empty section: none);
    # until then its mutants are still being read, and no number includes it
    pending = [s for s in scripts if s.name not in expected]
    measured = [s for s in scripts if s.name in expected]
    if args.todo or args.unlabelled:
        mutants, errors, missing = cs.collect(scripts, args.corpus)
        m = cm.measure(mutants, errors, cs.load_labels(), expected)
        if args.todo:
            sys.stdout.write(todo_rows(m))
        else:
            print(show(m.unlabelled + m.stale))
        return 0
    mutants, errors, missing = cs.collect(measured, args.corpus)
    labels = cs.load_labels()
    halves = [h for h in cs.SPLITS if any(s.split == h for s in scripts)]
    found_problems: list[str] = [f"not readable: {text}" for text in missing]
    as_json: dict = {}
    for half in halves:
        mine = [s for s in measured if s.split == half]
        names = {s.name for s in mine}
        m = cm.measure(
            {k: v for k, v in mutants.items() if k in names},
            {k: v for k, v in errors.items() if k in names},
            {k: v for k, v in labels.items() if k[0] in names},
            {k: v for k, v in expected.items() if k in names},
        )
        waiting = [s.name for s in pending if s.split == half]
        if args.json:
            as_json[half] = {
                "operators": {op: _as_dict(t) for op, t in m.by(1).items()},
                "total": _as_dict(m.total()),
                "scripts": len(mine),
                "not_yet_labelled": waiting,
            }
        else:
            print(f"== {half}: {len(mine)} labelled scripts measured")
            print("\n".join(_report(m, mine, mutants)))
            if waiting:
                print(
                    f"not yet labelled ({len(waiting)} scripts, in no number): {', '.join(waiting)}"
                )
            if args.details:
                print("\n" + "\n".join(details(m)))
            print()
        found_problems += problems(m)
        found_problems += [f"not yet labelled ({half}): {name}" for name in waiting]
    if args.json:
        print(json.dumps(as_json, indent=1))
        return 0
    if found_problems:
        print(f"{len(found_problems)} problems:")
        print("\n".join(found_problems))
    return 1 if args.check and found_problems else 0


def _as_dict(t: cm.Tally) -> dict:
    return {
        "labels": dict(t.labels),
        "engine_errors": t.errors,
        "default_path_precision": _ratio(t.default_path),
        "overall_precision": _ratio(t.overall),
        "expected": t.expected,
        "matched": t.matched,
        "recall": _recall(t),
    }
