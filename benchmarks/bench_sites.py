"""Precision and recall of the operators' sites on the public-style scripts in tests/styles.

Usage: python benchmarks/bench_sites.py [--details] [--json]
       python benchmarks/bench_sites.py --corpus DIR [--details] [--json] [--check] ...
       (the public-script corpus of issue 22: definitions in benchmarks/corpus_sites.py)

Ground truth: tests/styles/expected/<script>.toml, written by hand (operator -> the lines
where "the named bug, injected into the default training run" lands). Found: the engine's
first-order sites (``SourceFile.find_sites(all_variants())``), one per operator and line
(variants of one operator share their sites). A found site is true when an expected entry
accepts its line (and, for a moved statement, where it lands); an entry is missed when no
found site matches it. tests/test_style_sites.py imports this module for the same compare.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
for _path in (str(ROOT), str(ROOT / "benchmarks")):
    if _path not in sys.path:  # run as a script from anywhere
        sys.path.insert(0, _path)

from site_entries import (  # noqa: E402
    Entry,
    Found,
    code_line_at_or_above,
    entry_of,
    own_lines,
)

from mutations.registry import all_variants  # noqa: E402
from mutator import SourceFile  # noqa: E402

STYLES = ROOT / "tests" / "styles"
EXPECTED = STYLES / "expected"


@dataclass
class Score:
    true: list[Found] = field(default_factory=list)
    false: list[Found] = field(default_factory=list)
    matched: list[Entry] = field(default_factory=list)
    missed: list[Entry] = field(default_factory=list)


def load_expected(path: Path) -> dict[str, list[Entry]]:
    """Operator name -> expected entries (an empty list: the operator has no site)."""
    sites = tomllib.loads(path.read_text(encoding="utf-8"))["sites"]
    return {
        op: [entry_of(raw, f"{path.name}: {op}") for raw in entries]
        for op, entries in sites.items()
    }


def expected_files() -> list[Path]:
    return sorted(EXPECTED.glob("*.toml"))


def script_of(expected: Path) -> Path:
    return STYLES / f"{expected.stem}.py"


def found_sites(script: Path, operators=None) -> dict[str, set[Found]]:
    """Operator name -> the distinct sites the engine finds in ``script``."""
    source = SourceFile.from_path(str(script))
    text_lines = source.source.splitlines()
    found: dict[str, set[Found]] = defaultdict(set)
    for site in source.find_sites(operators if operators is not None else all_variants()):
        mutant = source.apply([site])
        elsewhere = set(mutant.lines) - own_lines(site, text_lines)
        landing = code_line_at_or_above(max(elsewhere), text_lines) if elsewhere else None
        found[site.operator.name].add(Found(site.line, landing))
    return found


def compare(expected: Iterable[Entry], found: Iterable[Found]) -> Score:
    expected, score = list(expected), Score()
    for site in sorted(found, key=lambda f: (f.line, f.landing or 0)):
        (score.true if any(e.accepts(site) for e in expected) else score.false).append(site)
    for entry in expected:
        (score.matched if any(entry.accepts(f) for f in found) else score.missed).append(entry)
    return score


def score_all() -> dict[str, dict[str, Score]]:
    """Script name -> operator -> score, for every script with an expected file."""
    operators = all_variants()
    table: dict[str, dict[str, Score]] = {}
    for path in expected_files():
        expected = load_expected(path)
        found = found_sites(script_of(path), operators)
        ops = sorted(set(expected) | set(found))
        table[script_of(path).name] = {
            op: compare(expected.get(op, []), found.get(op, set())) for op in ops
        }
    return table


def _ratio(hits: int, total: int) -> str:
    return f"{hits / total:.1%}" if total else "n/a"


def totals(scores: Iterable[Score]) -> tuple[int, int, int, int]:
    true = false = matched = missed = 0
    for s in scores:
        true, false = true + len(s.true), false + len(s.false)
        matched, missed = matched + len(s.matched), missed + len(s.missed)
    return true, false, matched, missed


def main() -> None:
    if "--corpus" in sys.argv[1:]:
        import corpus_report  # only here: the corpus mode needs its git mirrors

        sys.exit(corpus_report.main(sys.argv[1:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", action="store_true", help="list every false and missed site")
    parser.add_argument("--json", action="store_true", help="print the per-operator table as JSON")
    args = parser.parse_args()
    table = score_all()
    by_op: dict[str, list[Score]] = defaultdict(list)
    for ops in table.values():
        for op, score in ops.items():
            by_op[op].append(score)
    rows = []
    for op in sorted(by_op):
        true, false, matched, missed = totals(by_op[op])
        rows.append(
            {"operator": op, "true": true, "false": false, "matched": matched, "missed": missed}
        )
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(
        f"{'operator':32} {'found':>5} {'false':>5} {'precision':>9} {'expected':>8} {'missed':>6} {'recall':>7}"
    )
    for r in rows:
        found, expected = r["true"] + r["false"], r["matched"] + r["missed"]
        if not found and not expected:
            continue
        print(
            f"{r['operator']:32} {found:5d} {r['false']:5d} {_ratio(r['true'], found):>9} "
            f"{expected:8d} {r['missed']:6d} {_ratio(r['matched'], expected):>7}"
        )
    true, false, matched, missed = totals(s for scores in by_op.values() for s in scores)
    silent = sorted(
        op for op in by_op if not any(s.true or s.false or s.matched or s.missed for s in by_op[op])
    )
    print(
        f"\noverall: {len(table)} scripts, {true + false} sites found, {false} false, "
        f"precision {_ratio(true, true + false)}; {matched + missed} expected, {missed} missed, "
        f"recall {_ratio(matched, matched + missed)}"
    )
    print(f"operators with no expected and no found site on these scripts: {len(silent)}")
    if args.details:
        for script, ops in table.items():
            for op, score in ops.items():
                for f in score.false:
                    print(f"false  {script}:{f.describe()} {op}")
                for e in score.missed:
                    print(f"missed {script}:{e.describe()} {op}")


if __name__ == "__main__":
    main()
