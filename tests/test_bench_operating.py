"""Operating points with known answers: curves, detection within a false-positive budget,
the exact interval of a rate, and the conformal threshold."""

from __future__ import annotations

import math
import random

import pytest

from experiments.bench.operating import (
    best_within,
    conformal_threshold,
    curve,
    detection_at_fpr,
    fpr_established,
    fpr_interval,
)


def test_flagging_everything_detects_nothing_within_five_percent():
    assert detection_at_fpr([1.0] * 40, [1.0] * 100) == 0.0


def test_a_binary_detector_counts_at_its_one_operating_point_only_if_it_is_within_budget():
    clean = [1.0] * 1 + [0.0] * 39  # 2.5% of clean runs flagged
    mutants = [1.0] * 30 + [0.0] * 70
    assert detection_at_fpr(clean, mutants) == pytest.approx(0.3)
    clean = [1.0] * 3 + [0.0] * 37  # 7.5%: over budget, so only "flag nothing" is left
    assert detection_at_fpr(clean, mutants) == 0.0


def test_a_score_is_cut_at_the_best_threshold_within_the_budget():
    clean = [i / 100 for i in range(100)]  # 0.00 ... 0.99
    mutants = [0.5, 0.9, 0.96, 0.97, 2.0]
    # >= 0.95 flags 5 clean runs (5%) and 3 mutants; >= 0.94 would flag 6%
    assert detection_at_fpr(clean, mutants, 0.05) == pytest.approx(3 / 5)
    point = best_within(curve(clean, mutants), 0.05)
    assert point is not None and point.threshold == 0.96 and point.false_positives == 4
    assert detection_at_fpr(clean, mutants, 0.0) == pytest.approx(1 / 5)
    assert detection_at_fpr(clean, mutants, 1.0) == 1.0


def test_curve_runs_from_flag_nothing_to_flag_everything():
    points = curve([0.1, 0.2], [0.3, 0.1])
    assert (points[0].fpr, points[0].detection) == (0.0, 0.0)
    assert (points[-1].fpr, points[-1].detection) == (1.0, 1.0)
    assert [p.fpr for p in points] == sorted(p.fpr for p in points)


def test_without_clean_cases_there_is_no_operating_point():
    assert detection_at_fpr([], [1.0]) is None
    assert detection_at_fpr([0.0], []) is None


def test_exact_interval_needs_about_seventy_clean_runs_for_five_percent():
    low, high = fpr_interval(0, 72)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 72))
    assert fpr_established(0, 72) and not fpr_established(0, 71)
    assert not fpr_established(1, 80)  # 1 of 80: upper bound 0.068
    low, high = fpr_interval(4, 80)
    assert low < 0.05 < high
    assert fpr_interval(0, 0) == (0.0, 1.0) and not fpr_established(0, 0)


def test_conformal_threshold_ranks():
    scores = [float(i) for i in range(1, 40)]  # 39 scores: rank ceil(40 * 0.95) = 38
    assert conformal_threshold(scores, 0.05) == 38.0
    assert conformal_threshold(scores[:19], 0.05) == 19.0  # too few: the largest
    assert conformal_threshold(scores, 0.3) < conformal_threshold(scores, 0.05)
    with pytest.raises(ValueError):
        conformal_threshold([])


def test_conformal_threshold_holds_its_rate_on_new_clean_scores():
    rng = random.Random(7)
    rates = []
    for _ in range(200):
        calibration = [rng.random() for _ in range(50)]
        threshold = conformal_threshold(calibration, 0.1)
        fresh = [rng.random() for _ in range(50)]
        rates.append(sum(score > threshold for score in fresh) / len(fresh))
    # the threshold is the 46th of 50 (ceil(51 * 0.9)): a new score beats it with
    # probability 5/51 = 0.098 <= 0.1; the simulation agrees within its noise
    mean = sum(rates) / len(rates)
    assert math.isclose(mean, 5 / 51, abs_tol=0.01)
