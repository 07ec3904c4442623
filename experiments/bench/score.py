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
- runtime: mean seconds per case;
- detection at FPR <= 5%: the best detection over thresholds of the detector's score (or
  its one operating point) whose false-positive rate is within 5% (``operating``), and the
  exact 95% interval of the false-positive rate;
- clean code (source detectors): unmutated files flagged, over the reference loops and the
  style scripts (cases whose loop starts with ``styles/``).

The leaderboard files are written by ``experiments.bench.leaderboard``.
"""

from __future__ import annotations

import math
import signal
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from experiments import interrupt
from experiments.bench.api import (
    Detector,
    DetectorError,
    Finding,
    GarbageOutput,
    validate_findings,
)
from experiments.bench.corpus import Case
from experiments.bench.operating import TARGET_FPR, detection_at_fpr, fpr_interval
from experiments.unreached import SET_ASIDE

Progress = Callable[[int, int], None]


@dataclass
class Outcome:
    """One detector on one case."""

    case: Case
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    error_kind: str | None = None  # crash | timeout | garbage | fit
    seconds: float = 0.0
    score: float | None = None  # the detector's suspicion, for scored detectors

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
    scored: bool = False
    fit_notes: list[str] = field(default_factory=list)  # per held-out loop, what fit chose


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


def run_one(detector: Detector, case: Case, timeout_s: float) -> Outcome:
    started = time.perf_counter()
    outcome = Outcome(case)
    try:
        item = case.script if detector.inputs == "source" else case.load_run()
        if item is None:
            raise DetectorError(f"case {case.case_id} has no {detector.inputs} input")
        findings, score = _with_timeout(lambda: _assess(detector, item), timeout_s)
        outcome.findings = validate_findings(findings)
        outcome.score = score
    except _Timeout:
        outcome.error, outcome.error_kind = f"timed out after {timeout_s:g} s", "timeout"
    except GarbageOutput as error:
        outcome.error, outcome.error_kind = f"garbage output: {error}", "garbage"
    except Exception as error:  # any detector bug is data about the detector
        interrupt.check()  # unless it is a Ctrl-C a library turned into its own error
        kind = "timeout" if "timed out" in str(error) else "crash"
        outcome.error, outcome.error_kind = f"{type(error).__name__}: {error}", kind
    outcome.seconds = time.perf_counter() - started
    return outcome


def _assess(detector: Detector, item: Any) -> tuple[Any, float | None]:
    findings = detector.detect(item)
    if not detector.scored:
        return findings, None
    score = detector.suspicion(item)
    if not isinstance(score, (int, float)) or math.isnan(score):
        raise GarbageOutput(f"suspicion score {score!r} is not a number")
    return findings, float(score)


def run_detector(
    detector: Detector,
    cases: list[Case],
    timeout_s: float | None = None,
    progress: Progress | None = None,
) -> DetectorReport:
    """Every case through one detector (leave-one-loop-out training for learned ones)."""
    report = DetectorReport(detector.name, detector.kind, scored=detector.scored)
    reason = detector.unavailable()
    if reason:
        report.unavailable = reason
        return report
    timeout = timeout_s if timeout_s is not None else detector.timeout_s
    started = time.perf_counter()
    if detector.learned:
        report.outcomes = _leave_one_loop_out(detector, cases, timeout, progress, report.fit_notes)
    else:
        for done, case in enumerate(cases, 1):
            interrupt.check()  # a Ctrl-C a detector swallowed ends the benchmark here
            report.outcomes.append(run_one(detector, case, timeout))
            if progress:
                progress(done, len(cases))
    report.seconds = time.perf_counter() - started
    return report


def _leave_one_loop_out(
    detector: Detector,
    cases: list[Case],
    timeout: float,
    progress: Progress | None,
    notes: list[str],
) -> list[Outcome]:
    loops = sorted({case.loop for case in cases})
    # Every run is training data for all folds but its own: read each trace once.
    loaded = {case.case_id: case.load_run() for case in cases}
    outcomes: list[Outcome] = []
    for loop in loops:
        held_out = [case for case in cases if case.loop == loop]
        training = [loaded[case.case_id] for case in cases if case.loop != loop]
        try:
            if not training:
                raise DetectorError("no other loop to train on")
            detector.fit(training)
            summary = detector.fit_summary()
            if summary:
                notes.append(f"held out {loop}: {summary}")
        except Exception as error:
            interrupt.check()
            for case in held_out:
                outcomes.append(Outcome(case, error=f"fit failed: {error}", error_kind="fit"))
            continue
        for case in held_out:
            interrupt.check()
            outcomes.append(run_one(detector, case, timeout))
            if progress:
                progress(len(outcomes), len(cases))
    return outcomes


# -- scores --------------------------------------------------------------------------------


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _findings_key(outcome: Outcome) -> frozenset[tuple[str, str, str]]:
    return frozenset((f.rule, f.category, f.message) for f in outcome.findings)


CLEAN_CODE_PREFIX = "styles/"


def is_style(case: Case) -> bool:
    """An unmutated script in the style of public examples (clean code, not a loop)."""
    return case.loop.startswith(CLEAN_CODE_PREFIX)


def ground_truth(outcomes: list[Outcome]) -> list[Outcome]:
    """Outcomes that can be scored: not runs of mutants whose mutated lines never ran
    (status ``unreached``, or ``reached`` false; rows without the field count) or whose
    rewrite cannot run (``stillborn``)."""
    return [
        o
        for o in outcomes
        if o.case.result.get("status") not in SET_ASIDE
        and o.case.result.get("reached") is not False
    ]


def scores(outcomes: list[Outcome], scored: bool) -> list[float]:
    """Each outcome as a number: the detector's score, or 1/0 for finding/no finding.
    A failed case scores as "no finding" (-inf for scored detectors)."""
    if scored:
        return [o.score if o.score is not None else -math.inf for o in outcomes]
    return [1.0 if o.detected else 0.0 for o in outcomes]


def summarize(outcomes: list[Outcome], tolerance: int = 0, scored: bool = False) -> dict[str, Any]:
    """The headline numbers for a set of outcomes (one detector). The loops' own clean
    cases make the false-positive rate; style scripts only count as clean code."""
    outcomes = ground_truth(outcomes)
    mutants = [o for o in outcomes if not o.case.truth.clean]
    clean = [o for o in outcomes if o.case.truth.clean and not is_style(o.case)]
    clean_code = [o for o in outcomes if o.case.truth.clean and o.case.script is not None]
    false_positives = sum(1 for o in clean if o.detected)
    low, high = fpr_interval(false_positives, len(clean))
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
        "false_positives": false_positives,
        "fp_rate": _rate(false_positives, len(clean)),
        "fp_ci_low": low if clean else None,
        "fp_ci_high": high if clean else None,
        "clean_failed": sum(1 for o in clean if o.error),  # "no finding" by failure, not by look
        "detection_at_5fpr": detection_at_fpr(
            scores(clean, scored), scores(mutants, scored), TARGET_FPR
        ),
        "clean_code_files": len(clean_code) or None,
        "clean_code_fp": _rate(sum(1 for o in clean_code if o.detected), len(clean_code)),
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
    for outcome in ground_truth(outcomes):
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
