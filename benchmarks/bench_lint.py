"""trainwreck-lint against every first-order mutant of every reference loop, without runs.

Usage: python benchmarks/bench_lint.py [--by-code]
Detection counts a mutant as detected when the linter reports anything on it (as
experiments/bench/score.py scores a static detector; the clean loops must stay at zero
findings, so every finding on a mutant is due to the mutation). Localized: a finding on
a mutated line. Also prints every finding on the clean loops, tests/styles and tests/lint_clean.
"""

from __future__ import annotations

import argparse
import collections
import time
from pathlib import Path

from experiments.bench.api import ScriptInput
from experiments.bench.corpus import reference_loops, source_cases
from experiments.bench.lint import TrainwreckLint

ROOT = Path(__file__).resolve().parent.parent
STYLES = sorted((ROOT / "tests" / "styles").glob("*.py"))
LINT_CLEAN = sorted((ROOT / "tests" / "lint_clean").glob("*.py"))  # lint-only fixtures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--by-code", action="store_true", help="count detections per TW code")
    parser.add_argument("--save", type=Path, help="write the detected mutant ids here")
    parser.add_argument("--compare", type=Path, help="list changes against a --save file")
    args = parser.parse_args()
    start = time.perf_counter()
    cases, problems = source_cases(reference_loops())
    detector = TrainwreckLint()
    mutants = detected = localized = 0
    clean_findings: list[str] = []
    found_ids: set[str] = set()
    by_code: collections.Counter[str] = collections.Counter()
    for case in cases:
        findings = detector.check_source(case.script)
        if case.truth.clean:
            clean_findings += [
                f"{case.script.path}:{f.line} {f.rule} {f.message}" for f in findings
            ]
            continue
        mutants += 1
        detected += bool(findings)
        if findings:
            found_ids.add(case.case_id)
        lines = set(case.truth.mutant_lines)
        localized += any(f.line in lines for f in findings)
        by_code.update({f.rule for f in findings})
    for path in STYLES + LINT_CLEAN:
        relative = path.relative_to(ROOT).as_posix()
        script = ScriptInput(path.read_text(encoding="utf-8"), relative)
        clean_findings += [
            f"{script.path}:{f.line} {f.rule} {f.message}" for f in detector.check_source(script)
        ]
    seconds = time.perf_counter() - start
    print(
        f"mutants: {mutants}  detected: {detected} ({detected / max(mutants, 1):.3f})"
        f"  localized: {localized} ({localized / max(mutants, 1):.3f})"
    )
    print(
        f"clean scripts: {len(reference_loops())} loops + {len(STYLES)} styles"
        f" + {len(LINT_CLEAN)} lint fixtures,"
        f" findings: {len(clean_findings)}"
    )
    for line in clean_findings:
        print("  " + line)
    if problems:
        print(f"operator problems: {len(problems)}")
    if args.by_code:
        for code, count in sorted(by_code.items()):
            print(f"  {code}: {count}")
    if args.save:
        args.save.write_text("".join(f"{name}\n" for name in sorted(found_ids)))
    if args.compare:
        before = set(args.compare.read_text().split())
        for name in sorted(before - found_ids):
            print(f"  lost: {name}")
        for name in sorted(found_ids - before):
            print(f"  new:  {name}")
    print(f"{seconds:.1f} s")


if __name__ == "__main__":
    main()
