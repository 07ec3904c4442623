"""``trainwreck bench --real-faults``: the detectors on the real faults, beside the mutants.

The replay set is read from git mirrors (``--mirrors DIR``, default ``$TRAINWRECK_MIRRORS``
or the fetch tool's folder); nothing is fetched at run time. Source detectors read the
faulty and fixed files; run detectors read the faulty and fixed versions' runs, made here
through the harness for the faults that run offline and stored under
``<results>/real_faults`` (the harness's cache makes a second call rerun nothing). A learned
detector is fitted once on the mutant and clean runs it was scored on, never on a real
fault. Output: ``<results>/bench/real_faults.md`` and ``real_faults.csv``, and the same
Markdown on stdout.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from experiments import interrupt
from experiments.bench.api import Detector
from experiments.bench.corpus import Case
from experiments.bench.real import report as tables
from experiments.bench.real.cases import RealFault, collect, run_all, run_cases, source_cases
from experiments.bench.real.replay import REPLAY_SET, default_mirrors, load
from experiments.bench.score import DetectorReport, run_detector, run_one

RESULTS = "real_faults"
DEFAULT_SEEDS = 3
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Setup:
    mirrors: Path
    replay_set: Path
    seeds: int = DEFAULT_SEEDS


def prepare(mirrors: str | None, replay_set: str | None, seeds: int) -> Setup:
    """Check the options before anything runs; ValueError with one line saying what is wrong."""
    if seeds < 1:
        raise ValueError(f"--real-seeds {seeds}: give at least 1")
    folder = Path(mirrors) if mirrors else default_mirrors()
    if folder is None:
        raise ValueError(
            "--real-faults reads the fixes from git mirrors: give --mirrors DIR "
            "(DIR/<owner>+<name>/repo for each repository of the replay set)"
        )
    if not folder.is_dir():
        raise ValueError(f"--mirrors {folder}: not a folder (want DIR/<owner>+<name>/repo)")
    path = Path(replay_set) if replay_set else REPLAY_SET
    try:
        load(path)
    except FileNotFoundError:
        raise ValueError(f"--real-set {path}: no such file") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"--real-set {path}: {error}") from None
    return Setup(folder, path, seeds)


def _score(
    detector: Detector,
    cases: list[Case],
    training: list[Case],
    timeout: float | None,
    progress: Progress | None,
) -> DetectorReport:
    """Every real case through the detector; a learned one is fitted on ``training``."""
    if not detector.learned:
        return run_detector(detector, cases, timeout, progress)
    report = DetectorReport(detector.name, detector.kind, scored=detector.scored)
    reason = detector.unavailable()
    if reason:
        report.unavailable = reason
        return report
    try:
        detector.fit([case.load_run() for case in training])
    except Exception as error:  # a fit failure is data about the detector, as in the bench
        interrupt.check()
        report.unavailable = f"fit on the mutant runs failed: {error}"
        return report
    summary = detector.fit_summary()
    if summary:
        report.fit_notes.append(f"fitted on all loops: {summary}")
    limit = timeout if timeout is not None else detector.timeout_s
    for done, case in enumerate(cases, 1):
        interrupt.check()
        report.outcomes.append(run_one(detector, case, limit))
        if progress:
            progress(done, len(cases))
    return report


def score_real(
    setup: Setup,
    detectors: list[Detector],
    reports: list[DetectorReport],
    training: dict[str, list[Case]],
    results_dir: Path,
    timeout: float | None = None,
    tolerance: int = 0,
    progress: Callable[[str], Progress] | None = None,
) -> tuple[str, list[Path]]:
    """The real-fault section for every detector (``reports``: their scores on the mutants,
    in the same order); returns the Markdown and the files written."""
    faults = collect(setup.mirrors, setup.replay_set)
    if any(detector.inputs == "run" for detector in detectors):
        run_all(faults, setup.mirrors, setup.seeds, results_dir / RESULTS)
    lines = _header(faults, setup)
    rows = []
    for detector, main in zip(detectors, reports):
        runs = detector.inputs == "run"
        cases = run_cases(faults) if runs else source_cases(faults)
        step = progress(f"{detector.name} (real faults)") if progress else None
        real = _score(detector, cases, training.get(detector.name, []), timeout, step)
        if real.unavailable or main.unavailable:
            reason = real.unavailable or main.unavailable
            lines += [f"### {detector.name} ({detector.kind})", "", f"unavailable: {reason}", ""]
            continue
        per_operator = tables.operator_sides(main)
        scores = tables.fault_scores(real, per_operator, faults, runs, tolerance)
        lines += tables.markdown(detector.name, detector.kind, runs, scores, per_operator)
        errors = sum(1 for outcome in real.outcomes if outcome.error)
        if errors:
            lines += [f"{errors} real cases failed in the detector (scored as no finding).", ""]
        lines += [f"Fit: {note}" for note in real.fit_notes]
        rows += tables.fault_csv_rows(detector.name, scores)
    text = "\n".join(lines).rstrip() + "\n"
    out = results_dir / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "real_faults.md").write_text(text, encoding="utf-8")
    with open(out / "real_faults.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=tables.FAULT_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return text, [out / "real_faults.md", out / "real_faults.csv"]


def _header(faults: list[RealFault], setup: Setup) -> list[str]:
    read = [item for item in faults if item.read]
    if any(item.runs is not None for item in faults):
        ran = sum(1 for item in faults if item.runs is not None and item.runs.counted)
        runs = f"{ran} stand as ground truth for run detectors ({setup.seeds} seeds each)"
    else:
        runs = "no offline runs made (no run detector was scored)"
    return [
        "## Real faults beside the mutants",
        "",
        f"{len(faults)} real faults in {setup.replay_set.name} ({len(read)} read from "
        f"{setup.mirrors}); {runs}. A fault is detected in a case when the faulty version "
        "gets a finding (rule, category) the fixed version does not get on the same seed; "
        "the mutants are counted the same way against their unmutated loop.",
        "",
    ]
