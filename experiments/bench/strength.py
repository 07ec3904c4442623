"""The weakest strength each detector still detects, per parametric operator.

Reads the strength searches stored under ``RESULTS/strength/`` (``trainwreck strength``
or the catalog's strength pass): for each setting tried, run detectors see the stored runs
of that setting (detected: a finding on at least half of its seeds) and source detectors
its mutant (first site, as the search ran). No training happens: the resolution is that
of the settings the search tried. ``weakest`` is the weakest setting from which every
stronger tried setting is detected too (a detector that flags x100 but not x31 and then
x10 again has its weakest at x100, and ``monotone`` says no).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import pandas as pd

from experiments.bench.api import Detector
from experiments.bench.corpus import reference_loops, run_cases, source_cases
from experiments.bench.score import run_detector
from experiments.catalog import variant_label
from experiments.report.strength import STRENGTH_DIR

COLUMNS = ("detector", "loop", "operator", "direction", "weakest detected", "tried", "monotone")


def detector_strength(
    detectors: Sequence[Detector], results_dir: Path, timeout_s: float | None = None
) -> pd.DataFrame:
    searches = sorted((Path(results_dir) / STRENGTH_DIR).glob("*.csv"))
    runs = run_cases(results_dir)
    rows = []
    for path in searches:
        table = pd.read_csv(path)
        if table.empty or "spec" not in table:
            continue
        for detector in detectors:
            flags = [_detected(detector, spec, table, runs, timeout_s) for spec in table["spec"]]
            rows.append(_summary(detector.name, table, flags))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _detected(detector, spec: str, table: pd.DataFrame, runs, timeout_s) -> bool | None:
    from mutations.registry import resolve

    loop = str(table["loop"].iloc[0])
    label = resolve(spec).label
    if detector.inputs == "run":
        cases = [
            case
            for case in runs
            if case.loop == loop
            and case.truth.operators
            and variant_label(case.truth.identity, "") == label
        ]
        if not cases:
            return None
        report = run_detector(detector, cases, timeout_s)
        return 2 * sum(outcome.detected for outcome in report.outcomes) >= len(cases)
    paths = [path for path in reference_loops([loop]) if path.stem == loop]
    cases, _ = source_cases(paths, [resolve(spec)])
    mutants = [case for case in cases if not case.truth.clean][:1]
    if not mutants:
        return None
    return bool(run_detector(detector, mutants, timeout_s).outcomes[0].detected)


def _summary(name: str, table: pd.DataFrame, flags: list[bool | None]) -> dict:
    param = table.columns[3]
    known = [(value, flag) for value, flag in zip(table[param], flags) if flag is not None]
    weakest = None
    for value, flag in reversed(known):  # the table runs weak -> strong
        if not flag:
            break
        weakest = value
    seen = [flag for _, flag in known]
    monotone = all(not a or b for a, b in pairwise(seen))
    first = table.iloc[0]
    return {
        "detector": name,
        "loop": first["loop"],
        "operator": first["operator"],
        "direction": first["direction"],
        "weakest detected": "not detected" if weakest is None else f"{param}={weakest}",
        "tried": len(known),
        "monotone": monotone,
    }


def strength_main(argv: Sequence[str]) -> int:
    """``trainwreck bench strength --detector NAME [--results-dir DIR]``."""
    from experiments.bench.api import get_detector
    from experiments.cli_support import Parser, UserError

    parser = Parser(
        prog="trainwreck bench strength",
        description="The weakest setting of each parametric operator each detector detects.",
    )
    parser.add_argument("--detector", action="append", metavar="NAME", required=True)
    parser.add_argument("--results-dir", default="results", help="with strength/ searches")
    parser.add_argument("--timeout", type=float, help="seconds per case")
    args = parser.parse_args(list(argv))
    folder = Path(args.results_dir) / STRENGTH_DIR
    if not any(folder.glob("*.csv")):
        raise UserError(f"no strength searches in {folder}: run `trainwreck strength` first")
    try:
        detectors = [get_detector(name) for name in args.detector]
    except (KeyError, ValueError, TypeError) as error:
        raise UserError(str(error).strip("'\"")) from None
    table = detector_strength(detectors, Path(args.results_dir), args.timeout)
    out = Path(args.results_dir) / "bench" / "strength.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    print(table.to_string(index=False))
    return 0
