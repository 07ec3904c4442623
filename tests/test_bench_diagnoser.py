"""trainwreck-diagnoser: learns from signature features, is scored leaving one loop out, and
its threshold is calibrated on the training loops' clean runs for a stated false-positive
rate."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from test_bench_support import decreasing, synthetic_records, write_run

from experiments.bench.api import DetectorError, RunInput
from experiments.bench.corpus import run_cases
from experiments.bench.diagnoser import TrainwreckDiagnoser, features, is_unreached, run_label
from experiments.bench.score import run_detector, summarize


def _population(root: Path) -> None:
    """Three loops; per loop: clean runs, frozen-weight mutants, eval-mode mutants."""
    for loop_index, loop in enumerate(("a", "b", "c")):
        scale = 1.0 + loop_index  # loops differ in loss scale; the features must not care
        for seed in range(3):
            losses = [v * scale for v in decreasing(120, seed=seed)]
            write_run(root, f"{loop}c{seed}", synthetic_records(losses), loop=loop, seed=seed)
            flat = [2.3 * scale + 0.01 * ((i + seed) % 3) for i in range(120)]
            write_run(
                root,
                f"{loop}g{seed}",
                synthetic_records(flat, update_ratio=0.0),
                loop=loop,
                identity=f"{loop}::drop_backward#0",
                operators=["drop_backward"],
                categories=["gradient"],
                seed=seed,
            )
            write_run(
                root,
                f"{loop}m{seed}",
                synthetic_records(losses, eval_mode_fraction=1.0),
                loop=loop,
                identity=f"{loop}::drop_train_mode#0",
                operators=["drop_train_mode"],
                categories=["mode"],
                seed=seed,
            )


def test_features_are_numbers_and_labels_come_from_the_result(tmp_path: Path):
    _population(tmp_path)
    cases = run_cases(tmp_path)
    runs = [case.load_run() for case in cases]
    assert {run_label(run) for run in runs} == {"clean", "gradient", "mode"}
    lengths = {len(features(run)) for run in runs}
    assert len(lengths) == 1


def test_leave_one_loop_out_learns_the_patterns(tmp_path: Path):
    _population(tmp_path)
    report = run_detector(TrainwreckDiagnoser(), run_cases(tmp_path))
    summary = summarize(report.outcomes, scored=report.scored)
    assert summary["errors"] == 0
    assert summary["detection_rate"] == 1.0
    assert summary["category_accuracy"] == 1.0
    assert summary["fp_rate"] == 0.0
    # every fold's threshold came from the two other loops' clean runs, 3 seeds each
    assert len(report.fit_notes) == 3
    assert all("from 6 clean runs scored out of fold" in note for note in report.fit_notes)


def _noisy_curve(rng: random.Random, scale: float, tau: float, n: int = 100) -> list[float]:
    return [scale * (math.exp(-i / tau) + 0.05) * (1 + 0.08 * rng.gauss(0, 1)) for i in range(n)]


def _calibration_population(root: Path, clean_per_loop: int = 30) -> None:
    """Four loops alike in distribution; clean runs learn at random speeds, "slow" mutants
    learn at overlapping speeds (some indistinguishable from clean), "frozen" ones not at all."""
    for loop_index, loop in enumerate("wxyz"):
        rng = random.Random(loop_index)
        scale = 0.5 + loop_index
        for seed in range(clean_per_loop):
            losses = _noisy_curve(rng, scale, rng.uniform(15, 40))
            write_run(root, f"{loop}c{seed:03d}", synthetic_records(losses), loop=loop, seed=seed)
        for seed in range(12):
            slow = _noisy_curve(rng, scale, rng.uniform(30, 150))
            write_run(
                root,
                f"{loop}s{seed:03d}",
                synthetic_records(slow),
                loop=loop,
                identity=f"{loop}::scale_lr#0",
                categories=["optim"],
                seed=seed,
            )
            frozen = [scale * (1.05 + 0.08 * rng.gauss(0, 1)) for _ in range(100)]
            write_run(
                root,
                f"{loop}f{seed:03d}",
                synthetic_records(frozen, update_ratio=0.0),
                loop=loop,
                identity=f"{loop}::drop_step#0",
                categories=["gradient"],
                seed=seed,
            )


def test_calibrated_threshold_keeps_the_false_positive_rate_on_held_out_clean_runs(
    tmp_path: Path,
):
    _calibration_population(tmp_path)
    report = run_detector(TrainwreckDiagnoser(target_fpr=0.05), run_cases(tmp_path))
    clean = [o for o in report.outcomes if o.case.truth.clean]
    frozen = [o for o in report.outcomes if "drop_step" in o.case.truth.identity]
    slow = [o for o in report.outcomes if "scale_lr" in o.case.truth.identity]
    assert len(clean) == 120 and not any(o.error for o in report.outcomes)
    flagged = sum(o.detected for o in clean)
    assert flagged / len(clean) <= 0.05  # the stated rate, on loops it never saw
    assert all(o.detected for o in frozen)
    # the slow mutants overlap the clean runs: a threshold kept for the FPR must miss some
    assert 0 < sum(o.detected for o in slow) < len(slow)
    # calibration used the three training loops' clean runs only
    assert all("from 90 clean runs scored out of fold" in note for note in report.fit_notes)
    # and the score ranks: every frozen run above the median clean run
    clean_scores = sorted(o.score for o in clean)
    assert min(o.score for o in frozen) > clean_scores[len(clean_scores) // 2]


def test_untrained_or_single_label_diagnoser_is_an_error_not_a_guess(tmp_path: Path):
    write_run(tmp_path, "k1", synthetic_records(decreasing()), loop="a")
    write_run(tmp_path, "k2", synthetic_records(decreasing()), loop="b")
    report = run_detector(TrainwreckDiagnoser(), run_cases(tmp_path))
    assert all(o.error_kind == "fit" and not o.findings for o in report.outcomes)


def test_one_training_loop_cannot_calibrate_for_an_unseen_loop(tmp_path: Path):
    _population(tmp_path)
    two_loops = [case for case in run_cases(tmp_path) if case.loop in ("a", "b")]
    report = run_detector(TrainwreckDiagnoser(), two_loops)
    assert {o.error_kind for o in report.outcomes} == {"fit"}
    assert "two training loops" in report.outcomes[0].error


def test_unreached_mutants_are_not_examples_of_a_bug(tmp_path: Path):
    _population(tmp_path)
    runs = [case.load_run() for case in run_cases(tmp_path)]
    assert not any(is_unreached(run) for run in runs)  # rows without the field
    clean = [run for run in runs if run_label(run) == "clean"]
    mutants = [run for run in runs if run_label(run) != "clean"]
    unreached = [RunInput(run.records, {**run.result, "status": "unreached"}) for run in mutants]
    not_reached = [RunInput(run.records, {**run.result, "reached": False}) for run in mutants]
    for hidden in (unreached, not_reached):
        with pytest.raises(DetectorError, match="needs clean and mutant runs"):
            TrainwreckDiagnoser().fit([*clean, *hidden])
