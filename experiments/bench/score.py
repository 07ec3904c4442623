"""Run detectors over the cases, isolate their failures, score them, write the leaderboard.

A detector that crashes, hangs past its timeout or answers something that is not a list
of valid findings is scored as "no finding" for that case, with the error recorded; the
benchmark goes on. A detector that cannot run here at all (a missing tool) gets a
leaderboard row that says so, with the reason, and no numbers.

Scores (mutants = cases with a mutation, clean = unmutated scripts or runs):

- detection rate: mutants with at least one finding / mutants;
- false-positive rate: clean cases with at least one finding / clean cases (per seed for
  runs);
- localization: detected mutants with a finding line within the mutated lines (+- the
  tolerance) / detected mutants;
- category accuracy: detected mutants with a finding of the mutant's category / detected;
- changed: mutants whose findings differ from the same loop's clean findings (what a
  tool "sees" of a mutation, even when it also flags the clean script);
- steps to detection: median of the earliest finding step over detected mutants;
- runtime: mean seconds per case.
"""

from __future__ import annotations

import csv
import html
import io
import math
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.bench.api import (
    Detector,
    DetectorError,
    Finding,
    GarbageOutput,
    validate_findings,
)
from experiments.bench.corpus import Case
from experiments.files import write_text_atomic

Progress = Callable[[int, int], None]


@dataclass
class Outcome:
    """One detector on one case."""

    case: Case
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    error_kind: str | None = None  # crash | timeout | garbage | fit
    seconds: float = 0.0

    @property
    def detected(self) -> bool:
        return bool(self.findings)

    def localized(self, tolerance: int = 0) -> bool:
        lines = self.case.truth.mutant_lines
        return any(
            finding.line is not None
            and any(abs(finding.line - line) <= tolerance for line in lines)
            for finding in self.findings
        )

    @property
    def category_correct(self) -> bool:
        return any(finding.category in self.case.truth.categories for finding in self.findings)

    @property
    def first_step(self) -> int | None:
        steps = [finding.step for finding in self.findings if finding.step is not None]
        return min(steps) if steps else None


@dataclass
class DetectorReport:
    name: str
    kind: str
    outcomes: list[Outcome] = field(default_factory=list)
    unavailable: str | None = None
    seconds: float = 0.0


class _Timeout(Exception):
    pass


def _with_timeout(function: Callable[[], Any], seconds: float) -> Any:
    """Run in-process code with a deadline (SIGALRM; only possible on the main thread)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable or seconds <= 0:
        return function()

    def alarm(signum: int, frame: Any) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return function()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _run_one(detector: Detector, case: Case, timeout_s: float) -> Outcome:
    started = time.perf_counter()
    outcome = Outcome(case)
    try:
        item = case.script if detector.inputs == "source" else case.load_run()
        if item is None:
            raise DetectorError(f"case {case.case_id} has no {detector.inputs} input")
        outcome.findings = validate_findings(
            _with_timeout(lambda: detector.detect(item), timeout_s)
        )
    except _Timeout:
        outcome.error, outcome.error_kind = f"timed out after {timeout_s:g} s", "timeout"
    except GarbageOutput as error:
        outcome.error, outcome.error_kind = f"garbage output: {error}", "garbage"
    except Exception as error:  # any detector bug is data about the detector
        kind = "timeout" if "timed out" in str(error) else "crash"
        outcome.error, outcome.error_kind = f"{type(error).__name__}: {error}", kind
    outcome.seconds = time.perf_counter() - started
    return outcome


def run_detector(
    detector: Detector,
    cases: list[Case],
    timeout_s: float | None = None,
    progress: Progress | None = None,
) -> DetectorReport:
    """Every case through one detector (leave-one-loop-out training for learned ones)."""
    report = DetectorReport(detector.name, detector.kind)
    reason = detector.unavailable()
    if reason:
        report.unavailable = reason
        return report
    timeout = timeout_s if timeout_s is not None else detector.timeout_s
    started = time.perf_counter()
    if detector.learned:
        report.outcomes = _leave_one_loop_out(detector, cases, timeout, progress)
    else:
        for done, case in enumerate(cases, 1):
            report.outcomes.append(_run_one(detector, case, timeout))
            if progress:
                progress(done, len(cases))
    report.seconds = time.perf_counter() - started
    return report


def _leave_one_loop_out(
    detector: Detector, cases: list[Case], timeout: float, progress: Progress | None
) -> list[Outcome]:
    loops = sorted({case.loop for case in cases})
    outcomes: list[Outcome] = []
    for loop in loops:
        held_out = [case for case in cases if case.loop == loop]
        training = [case.load_run() for case in cases if case.loop != loop]
        try:
            if not training:
                raise DetectorError("no other loop to train on")
            detector.fit(training)
        except Exception as error:
            for case in held_out:
                outcomes.append(Outcome(case, error=f"fit failed: {error}", error_kind="fit"))
            continue
        for case in held_out:
            outcomes.append(_run_one(detector, case, timeout))
            if progress:
                progress(len(outcomes), len(cases))
    return outcomes


# -- scores --------------------------------------------------------------------------------


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _findings_key(outcome: Outcome) -> frozenset[tuple[str, str, str]]:
    return frozenset((f.rule, f.category, f.message) for f in outcome.findings)


def summarize(outcomes: list[Outcome], tolerance: int = 0) -> dict[str, Any]:
    """The headline numbers for a set of outcomes (one detector)."""
    mutants = [o for o in outcomes if not o.case.truth.clean]
    clean = [o for o in outcomes if o.case.truth.clean]
    detected = [o for o in mutants if o.detected]
    clean_keys = {(o.case.loop, o.case.seed): _findings_key(o) for o in clean}
    clean_by_loop = {o.case.loop: _findings_key(o) for o in clean}
    changed = [
        o
        for o in mutants
        if _findings_key(o)
        != clean_keys.get((o.case.loop, o.case.seed), clean_by_loop.get(o.case.loop, frozenset()))
    ]
    steps = [o.first_step for o in detected if o.first_step is not None]
    # Detectors that never report lines (run-level ones) have no localization at all.
    reports_lines = any(f.line is not None for o in outcomes for f in o.findings)
    located = [o for o in detected if o.case.truth.mutant_lines] if reports_lines else []
    return {
        "cases": len(outcomes),
        "mutants": len(mutants),
        "detected": len(detected),
        "detection_rate": _rate(len(detected), len(mutants)),
        "clean": len(clean),
        "false_positives": sum(1 for o in clean if o.detected),
        "fp_rate": _rate(sum(1 for o in clean if o.detected), len(clean)),
        "localization": _rate(sum(1 for o in located if o.localized(tolerance)), len(located)),
        "category_accuracy": _rate(sum(1 for o in detected if o.category_correct), len(detected)),
        "changed": len(changed),
        "median_steps": statistics.median(steps) if steps else None,
        "mean_seconds": statistics.fmean(o.seconds for o in outcomes) if outcomes else None,
        "errors": sum(1 for o in outcomes if o.error),
    }


def per_group(outcomes: list[Outcome], key: str, tolerance: int = 0) -> list[dict[str, Any]]:
    """Scores per operator (``key="operator"``) or per category (``key="category"``)."""
    groups: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        truth = outcome.case.truth
        if truth.clean:
            continue
        for name in set(truth.operators if key == "operator" else truth.categories):
            groups.setdefault(name, []).append(outcome)
    rows = []
    for name, members in sorted(groups.items()):
        detected = [o for o in members if o.detected]
        steps = [o.first_step for o in detected if o.first_step is not None]
        rows.append(
            {
                key: name,
                "mutants": len(members),
                "detected": len(detected),
                "detection_rate": _rate(len(detected), len(members)),
                "localization": _rate(
                    sum(1 for o in detected if o.localized(tolerance)),
                    len(detected) if any(f.line for o in detected for f in o.findings) else 0,
                ),
                "category_accuracy": _rate(
                    sum(1 for o in detected if o.category_correct), len(detected)
                ),
                "median_steps": statistics.median(steps) if steps else None,
                "errors": sum(1 for o in members if o.error),
            }
        )
    return rows


# -- leaderboard -----------------------------------------------------------------------------

LEADERBOARD_COLUMNS = (
    "detector",
    "kind",
    "mutants",
    "detection_rate",
    "clean",
    "fp_rate",
    "localization",
    "category_accuracy",
    "changed",
    "median_steps",
    "mean_seconds",
    "errors",
    "note",
)


def leaderboard_rows(reports: Iterable[DetectorReport], tolerance: int = 0) -> list[dict[str, Any]]:
    rows = []
    for report in reports:
        if report.unavailable:
            row = dict.fromkeys(LEADERBOARD_COLUMNS)
            row.update(
                detector=report.name, kind=report.kind, note=f"unavailable: {report.unavailable}"
            )
        else:
            summary = summarize(report.outcomes, tolerance)
            row = {column: summary.get(column) for column in LEADERBOARD_COLUMNS}
            row.update(detector=report.name, kind=report.kind, note="")
            kinds = sorted({o.error_kind for o in report.outcomes if o.error_kind})
            if kinds:
                row["note"] = "errors: " + ", ".join(kinds)
        rows.append(row)
    return rows


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return str(value)


def markdown_table(rows: list[dict[str, Any]], columns: Iterable[str] | None = None) -> str:
    if not rows:
        return "(no rows)\n"
    names = list(columns or rows[0].keys())
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for row in rows:
        lines.append(
            "| " + " | ".join(_cell(row.get(name)).replace("|", "/") for name in names) + " |"
        )
    return "\n".join(lines) + "\n"


def leaderboard_markdown(reports: list[DetectorReport], tolerance: int = 0) -> str:
    parts = [
        "# Detector leaderboard\n",
        markdown_table(leaderboard_rows(reports, tolerance), LEADERBOARD_COLUMNS),
    ]
    for report in reports:
        if report.unavailable:
            continue
        parts.append(f"\n## {report.name}: per category\n")
        parts.append(markdown_table(per_group(report.outcomes, "category", tolerance)))
        parts.append(f"\n## {report.name}: per operator\n")
        parts.append(markdown_table(per_group(report.outcomes, "operator", tolerance)))
    return "".join(parts)


def html_section(reports: list[DetectorReport], tolerance: int = 0) -> str:
    """A self-contained ``<section>`` for the HTML report (no scripts, no external assets)."""
    rows = leaderboard_rows(reports, tolerance)
    head = "".join(f"<th>{html.escape(column)}</th>" for column in LEADERBOARD_COLUMNS)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(_cell(row.get(c)))}</td>" for c in LEADERBOARD_COLUMNS)
        + "</tr>"
        for row in rows
    )
    return (
        '<section id="detector-benchmark"><h2>Detector benchmark</h2>'
        "<p>Detection rate over mutants, false-positive rate over unmutated scripts/runs, "
        "localization and category accuracy over detected mutants.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>"
    )


def _csv_text(rows: list[dict[str, Any]], columns: Iterable[str] | None = None) -> str:
    buffer = io.StringIO()
    names = list(columns or (rows[0].keys() if rows else []))
    writer = csv.DictWriter(buffer, fieldnames=names, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def outcome_rows(reports: Iterable[DetectorReport]) -> list[dict[str, Any]]:
    rows = []
    for report in reports:
        for outcome in report.outcomes:
            truth = outcome.case.truth
            rows.append(
                {
                    "detector": report.name,
                    "case": outcome.case.case_id,
                    "loop": outcome.case.loop,
                    "seed": outcome.case.seed,
                    "operators": "+".join(truth.operators),
                    "categories": "+".join(truth.categories),
                    "mutant_lines": " ".join(map(str, truth.mutant_lines)),
                    "detected": outcome.detected,
                    "finding_categories": " ".join(f.category for f in outcome.findings),
                    "finding_lines": " ".join(str(f.line) for f in outcome.findings if f.line),
                    "finding_rules": " ".join(f.rule for f in outcome.findings),
                    "first_step": outcome.first_step,
                    "error": outcome.error or "",
                    "seconds": round(outcome.seconds, 4),
                }
            )
    return rows


def write_leaderboard(
    reports: list[DetectorReport], out_dir: Path, tolerance: int = 0
) -> list[Path]:
    """leaderboard.md, leaderboard.csv, per_operator.csv, outcomes.csv and section.html."""
    per_operator = [
        {"detector": report.name, **row}
        for report in reports
        for row in per_group(report.outcomes, "operator", tolerance)
    ]
    files = {
        "leaderboard.md": leaderboard_markdown(reports, tolerance),
        "leaderboard.csv": _csv_text(leaderboard_rows(reports, tolerance), LEADERBOARD_COLUMNS),
        "per_operator.csv": _csv_text(per_operator),
        "outcomes.csv": _csv_text(outcome_rows(reports)),
        "section.html": html_section(reports, tolerance),
    }
    written = []
    for name, text in files.items():
        write_text_atomic(out_dir / name, text)
        written.append(out_dir / name)
    return written
