"""trainwreck-diagnoser: learns categories from signature features and is scored leaving
one loop out."""

from __future__ import annotations

from pathlib import Path

from test_bench_support import decreasing, synthetic_records, write_run

from experiments.bench.corpus import run_cases
from experiments.bench.diagnoser import TrainwreckDiagnoser, features, run_label
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
    summary = summarize(report.outcomes)
    assert summary["errors"] == 0
    assert summary["detection_rate"] == 1.0
    assert summary["category_accuracy"] == 1.0
    assert summary["fp_rate"] == 0.0


def test_untrained_or_single_label_diagnoser_is_an_error_not_a_guess(tmp_path: Path):
    write_run(tmp_path, "k1", synthetic_records(decreasing()), loop="a")
    write_run(tmp_path, "k2", synthetic_records(decreasing()), loop="b")
    report = run_detector(TrainwreckDiagnoser(), run_cases(tmp_path))
    assert all(o.error_kind == "fit" and not o.findings for o in report.outcomes)
