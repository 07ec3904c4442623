"""Operating points: detection against false-positive rate, so no detector wins by flagging
everything.

A detector's answer on a case is a number: its ``suspicion`` score where it has one (higher
is more suspicious), else 1 when it reported a finding and 0 when it did not. Flagging every
case with a score at or above a threshold gives one point (false-positive rate over the
clean cases, detection rate over the mutants); every distinct score is a threshold, plus
"flag nothing". ``detection_at_fpr`` is the best detection among the points whose measured
false-positive rate is within the budget, so a detector that flags every clean case gets 0
there, however many mutants it "detects".

The false-positive rate of a few dozen clean runs is uncertain: ``fpr_interval`` gives the
exact (Clopper-Pearson) 95% interval, and ``fpr_established`` says whether its upper end is
within the target, which takes about 60 clean cases with none flagged for a 5% target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

TARGET_FPR = 0.05
CURVE_FPRS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


@dataclass(frozen=True)
class Point:
    threshold: float  # flag cases whose score is >= this (inf: flag nothing)
    fpr: float
    detection: float
    false_positives: int
    detected: int


def curve(clean: Sequence[float], mutants: Sequence[float]) -> list[Point]:
    """Every operating point, from "flag nothing" to "flag everything" (fpr ascending)."""
    thresholds = sorted({*clean, *mutants}, reverse=True)
    points = [Point(math.inf, 0.0, 0.0, 0, 0)]
    for threshold in thresholds:
        false_positives = sum(1 for score in clean if score >= threshold)
        detected = sum(1 for score in mutants if score >= threshold)
        points.append(
            Point(
                threshold,
                false_positives / len(clean) if clean else math.nan,
                detected / len(mutants) if mutants else math.nan,
                false_positives,
                detected,
            )
        )
    return points


def best_within(points: Sequence[Point], max_fpr: float) -> Point | None:
    """The point with the highest detection whose false-positive rate is <= ``max_fpr``."""
    allowed = [p for p in points if not math.isnan(p.fpr) and p.fpr <= max_fpr + 1e-12]
    if not allowed:
        return None
    return max(allowed, key=lambda p: (p.detection, -p.fpr))


def detection_at_fpr(
    clean: Sequence[float], mutants: Sequence[float], max_fpr: float = TARGET_FPR
) -> float | None:
    """Best detection at a measured false-positive rate <= ``max_fpr``; None without clean
    cases (then no threshold can be judged) or without mutants."""
    if not clean or not mutants:
        return None
    point = best_within(curve(clean, mutants), max_fpr)
    return point.detection if point else None


def fpr_interval(false_positives: int, clean: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) confidence interval of a rate of ``false_positives``/``clean``."""
    if clean <= 0:
        return (0.0, 1.0)
    from scipy.stats import beta

    alpha = 1 - level
    low = (
        0.0
        if false_positives == 0
        else float(beta.ppf(alpha / 2, false_positives, clean - false_positives + 1))
    )
    high = (
        1.0
        if false_positives == clean
        else float(beta.ppf(1 - alpha / 2, false_positives + 1, clean - false_positives))
    )
    return (low, high)


def fpr_established(false_positives: int, clean: int, target: float = TARGET_FPR) -> bool:
    """Whether the interval's upper end is within the target (enough clean cases, few flagged)."""
    return clean > 0 and fpr_interval(false_positives, clean)[1] <= target


def conformal_threshold(clean_scores: Sequence[float], target_fpr: float = TARGET_FPR) -> float:
    """A threshold that flags a new clean case with probability <= ``target_fpr``.

    Flag a case when its score is strictly above the ceil((n+1)(1-a))-th smallest of n
    clean scores (split-conformal): if the new clean case is exchangeable with the n, it
    lands above that many of them with probability at most a. With fewer than 1/a - 1 clean
    scores that rank does not exist and the threshold is the largest score (the rate is
    then not guaranteed, only as low as the clean cases can show).
    """
    if not clean_scores:
        raise ValueError("no clean scores to calibrate on")
    ordered = sorted(clean_scores)
    rank = math.ceil((len(ordered) + 1) * (1 - target_fpr))
    return ordered[min(rank, len(ordered)) - 1]
