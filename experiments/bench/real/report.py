"""Detection on real faults beside detection on mutants (issue 32): the tables.

For one detector, a real fault is **detected** in a case when the faulty version gets a
finding (rule and category) that the fixed version does not get on the same seed: public
code can carry findings that have nothing to do with the fault, and a finding the fix does
not remove does not point at the fault. The coupled operators' mutants are counted the same
way against their unmutated loop (same loop and seed), so the two rates answer one question:
does the detector see the bug that the change put there? (The leaderboard's own
``detection_rate`` counts any finding.) A fault that does not stand as ground truth for the
detector's input is listed with the reason and counted nowhere.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from experiments.bench.real.cases import RealFault
from experiments.bench.real.replay import CLASSES
from experiments.bench.real.runs import LIVE
from experiments.bench.score import DetectorReport, Outcome, ground_truth, is_style

FAULT_COLUMNS = (
    "detector",
    "fault",
    "class",
    "repository",
    "standing",
    "coupled_operators",
    "faulty_cases",
    "detected",
    "localized",
    "fixed_flagged",
    "mutant_cases",
    "mutant_detected",
    "operator_mutants",
    "operator_detected",
)


def _keys(outcome: Outcome | None) -> Counter:
    if outcome is None:
        return Counter()
    return Counter((finding.rule, finding.category) for finding in outcome.findings)


def new_finding(outcome: Outcome, baseline: Outcome | None) -> bool:
    """A finding (rule, category) the baseline does not have as often."""
    theirs = _keys(baseline)
    return any(count > theirs[key] for key, count in _keys(outcome).items())


def _localized(outcome: Outcome, baseline: Outcome | None, tolerance: int) -> bool:
    """A finding on the fault's lines of a rule the baseline does not report as often."""
    theirs = _keys(baseline)
    lines = outcome.case.truth.mutant_lines
    return any(
        finding.line is not None
        and any(abs(finding.line - line) <= tolerance for line in lines)
        and _keys(outcome)[(finding.rule, finding.category)]
        > theirs[(finding.rule, finding.category)]
        for finding in outcome.findings
    )


@dataclass
class Side:
    """Cases of one kind and how many were detected."""

    cases: int = 0
    detected: int = 0
    localized: int = 0

    def add(self, detected: bool, localized: bool = False) -> None:
        self.cases += 1
        self.detected += int(detected)
        self.localized += int(localized)

    def rate(self) -> str:
        return (
            f"{self.detected}/{self.cases} ({self.detected / self.cases:.0%})"
            if self.cases
            else "-"
        )


@dataclass
class FaultScore:
    item: RealFault
    standing: str
    faulty: Side = field(default_factory=Side)
    fixed_flagged: Side = field(default_factory=Side)
    mutant: Side = field(default_factory=Side)  # the coupled mutant of the same fixed file
    operators: Side = field(default_factory=Side)  # the coupled operators' mutants of the loops


def _baselines(outcomes: list[Outcome]) -> tuple[dict, dict]:
    clean = [o for o in outcomes if o.case.truth.clean]
    by_seed = {(o.case.loop, o.case.seed): o for o in clean}
    by_loop = {o.case.loop: o for o in clean}
    return by_seed, by_loop


def _baseline(outcome: Outcome, by_seed: dict, by_loop: dict) -> Outcome | None:
    case = outcome.case
    return by_seed.get((case.loop, case.seed), by_loop.get(case.loop))


def operator_sides(main: DetectorReport) -> dict[str, list[bool]]:
    """Per operator, whether each of its (ground-truth) mutants of the loops was detected."""
    outcomes = [o for o in ground_truth(main.outcomes) if not is_style(o.case)]
    by_seed, by_loop = _baselines(outcomes)
    found: dict[str, list[bool]] = defaultdict(list)
    for outcome in outcomes:
        if outcome.case.truth.clean:
            continue
        seen = new_finding(outcome, _baseline(outcome, by_seed, by_loop))
        for name in set(outcome.case.truth.operators):
            found[name].append(seen)
    return found


def fault_scores(
    real: DetectorReport,
    per_operator: dict[str, list[bool]],
    faults: list[RealFault],
    runs: bool,
    tolerance: int = 0,
) -> list[FaultScore]:
    """One detector on every fault: its faulty cases, fixed cases, coupled mutant cases."""
    outcomes = ground_truth(real.outcomes)
    by_seed, by_loop = _baselines(outcomes)
    scores = []
    for item in faults:
        standing = item.run_standing() if runs else item.static_standing()
        score = FaultScore(item, standing)
        for name in item.coupled:
            for seen in per_operator.get(name, []):
                score.operators.add(seen)
        if standing == LIVE:
            for outcome in (o for o in outcomes if o.case.loop == item.loop):
                truth = outcome.case.truth
                baseline = _baseline(outcome, by_seed, by_loop)
                if truth.clean:
                    score.fixed_flagged.add(bool(outcome.findings))
                elif truth.identity.startswith("real::"):
                    score.faulty.add(
                        new_finding(outcome, baseline), _localized(outcome, baseline, tolerance)
                    )
                else:
                    score.mutant.add(new_finding(outcome, baseline))
        scores.append(score)
    return scores


def class_rows(
    scores: list[FaultScore], per_operator: dict[str, list[bool]]
) -> list[dict[str, Any]]:
    """Per class (and all): detection on the counted real faults, and on the mutants of the
    operators that couple them (each operator's mutants once)."""
    rows = []
    for name in (*CLASSES, "all"):
        group = [
            s for s in scores if s.standing == LIVE and name in ("all", s.item.fault.fault_class)
        ]
        if not group:
            continue
        real, mutants = Side(), Side()
        for s in group:
            real.cases += s.faulty.cases
            real.detected += s.faulty.detected
        operators = sorted({op for s in group for op in s.item.coupled})
        for op in operators:
            for seen in per_operator.get(op, []):
                mutants.add(seen)
        uncoupled = sum(1 for s in group if not s.item.coupled)
        rows.append(
            {
                "class": name,
                "faults": len(group),
                "real": real,
                "operators": operators,
                "mutants": mutants,
                "uncoupled": uncoupled,
            }
        )
    return rows


def fault_csv_rows(detector: str, scores: list[FaultScore]) -> list[dict[str, Any]]:
    return [
        {
            "detector": detector,
            "fault": s.item.fault.id,
            "class": s.item.fault.fault_class,
            "repository": s.item.fault.repository,
            "standing": s.standing,
            "coupled_operators": " ".join(s.item.coupled),
            "faulty_cases": s.faulty.cases,
            "detected": s.faulty.detected,
            "localized": s.faulty.localized,
            "fixed_flagged": s.fixed_flagged.detected,
            "mutant_cases": s.mutant.cases,
            "mutant_detected": s.mutant.detected,
            "operator_mutants": s.operators.cases,
            "operator_detected": s.operators.detected,
        }
        for s in scores
    ]


def markdown(
    detector: str, kind: str, runs: bool, scores: list[FaultScore], per_operator: dict
) -> list[str]:
    """The section of one detector: per class, per fault, and the faults not counted."""
    unit = "runs" if runs else "files"
    lines = [f"### {detector} ({kind}; real faults as {unit})", ""]
    classes = class_rows(scores, per_operator)
    if not classes:
        lines += ["No real fault stands as ground truth for this detector here.", ""]
    else:
        lines += [
            f"| class | real faults | real {unit} detected | coupled operators | their mutants "
            "detected (reference loops) | faults without a coupled operator |",
            "|---|---|---|---|---|---|",
        ]
        for row in classes:
            everything = row["class"] == "all"
            name = f"**{row['class']}**" if everything else row["class"]
            named = ", ".join(row["operators"]) or "-"
            if everything:
                named = f"{len(row['operators'])} operators"
            lines.append(
                f"| {name} | {row['faults']} | {row['real'].rate()} | "
                f"{named} | {row['mutants'].rate()} | "
                f"{row['uncoupled']} |"
            )
        lines.append("")
    counted = [s for s in scores if s.standing == LIVE]
    if counted:
        lines += [
            f"| fault | class | faulty {unit} detected | on the fault's lines | fixed {unit} "
            "flagged | its coupled mutant (same file) | coupled operators' mutants |",
            "|---|---|---|---|---|---|---|",
        ]
        for s in counted:
            ops = ", ".join(s.item.coupled) or "none"
            lines.append(
                f"| {s.item.fault.id} | {s.item.fault.fault_class} | {s.faulty.rate()} | "
                f"{s.faulty.localized}/{s.faulty.cases} | {s.fixed_flagged.rate()} | "
                f"{s.mutant.rate()} | {ops}: {s.operators.rate()} |"
            )
        lines.append("")
    aside = [s for s in scores if s.standing != LIVE]
    if aside:
        lines.append(f"Shown, not counted ({len(aside)}):")
        lines.append("")
        reasons: dict[str, list[str]] = defaultdict(list)
        for s in aside:
            reasons[s.standing].append(s.item.fault.id)
        for reason, ids in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"- {reason}: {', '.join(ids)}")
        lines.append("")
    return lines
