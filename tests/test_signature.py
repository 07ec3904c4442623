"""Signature features on synthetic traces whose shape is known by construction."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fixtures_runs import N_CLASSES, RunSpec, simulate

from experiments.signature import FEATURES, loss_curve, signature


def features_of(behaviour: str, seed: int = 0, n_classes: int | None = None, **kwargs):
    records, result = simulate(RunSpec(behaviour, seed, **kwargs))
    return signature(records, result, n_classes=n_classes)


def backward(losses, start=0):
    return [{"kind": "backward", "i": start + i, "loss": v} for i, v in enumerate(losses)]


# Features that are text by design: names, an error, where the outcome numbers came from.
TEXT_FEATURES = ("optimizer", "holdout_error", "outcome_source")


def test_every_feature_is_present_and_numeric_or_none():
    features = features_of("healthy")
    assert tuple(features) == FEATURES
    for name, value in features.items():
        if name in TEXT_FEATURES:
            assert value is None or isinstance(value, str), name
        else:
            assert value is None or isinstance(value, int | float), name


def test_outcome_source_names_where_the_outcome_numbers_came_from():
    records, result = simulate(RunSpec("healthy", 0))
    assert signature(records, result, n_classes=None)["outcome_source"] == "report"
    captured = [
        {**record, "source": "stdout"} if record["kind"] == "report" else record
        for record in records
    ]
    assert signature(captured, result, n_classes=None)["outcome_source"] == "stdout"
    held_out = [*records, {"kind": "holdout", "metric": 0.9, "loss": 0.3, "chance": 0.1}]
    assert signature(held_out, result, n_classes=None)["outcome_source"] == "holdout"
    failed = [*records, {"kind": "holdout", "error": "RuntimeError: shape"}]
    assert signature(failed, result, n_classes=None)["outcome_source"] == "report"
    # A val metric and a val loss from two sources: the metric's measures the model.
    mixed = [*captured, {"kind": "report", "val_loss": 0.3, "source": "tensorboard"}]
    assert signature(mixed, result, n_classes=None)["outcome_source"] == "stdout"
    silent = [record for record in records if record["kind"] != "report"]
    assert signature(silent, result, n_classes=None)["outcome_source"] == "none"


def test_healthy_run_learns_from_a_calibrated_start():
    features = features_of("healthy", n_classes=N_CLASSES)
    assert features["init_loss_ratio"] == pytest.approx(1.0, abs=0.05)
    assert features["final_over_initial"] < 0.2
    assert features["best_loss"] <= features["final_loss"] * 1.05
    assert features["log_slope_last_half"] < 0
    assert features["first_nan_step"] is None
    assert features["diverged"] == 0
    assert features["spike_count"] == 0
    assert features["val_metric_vs_chance"] > 0.5
    assert features["update_ratio_median"] == pytest.approx(1e-3, rel=0.3)
    assert features["optimizer_steps"] == 300
    assert features["eval_mode_train_frac"] == 0.0
    assert features["eval_grad_frac"] == 0.0
    assert features["time_per_step"] == pytest.approx(0.004, rel=0.2)
    assert features["grad_norm_trend"] < 0


def test_flat_run_without_steps_plateaus_at_its_start():
    features = features_of("flat", n_classes=N_CLASSES)
    assert features["final_over_initial"] == pytest.approx(1.0, abs=0.02)
    assert features["plateau_frac"] > 0.5
    assert features["optimizer_steps"] == 0
    assert features["grad_norm_median"] is None
    assert features["val_metric_vs_chance"] == pytest.approx(0.0, abs=0.03)


def test_nan_step_is_found_and_features_use_the_finite_prefix():
    records, result = simulate(RunSpec("nan", 3))
    losses = [r["loss"] for r in records if r["kind"] == "backward"]
    features = signature(records, result, n_classes=None)
    assert losses[-1] == "nan"
    assert features["first_nan_step"] == len(losses) - 1
    assert features["diverged"] == 1
    assert math.isfinite(features["final_loss"])


def test_crash_at_step_zero_gives_none_not_an_error():
    records = [{"kind": "start", "t": 0.0}, {"kind": "end", "t": 0.1, "status": "crash"}]
    features = signature(records, {"status": "crash", "steps": 0}, n_classes=10)
    assert features["n_losses"] == 0
    assert features["initial_loss"] is None
    assert features["final_over_initial"] is None
    assert features["optimizer_steps"] == 0


def test_empty_trace_and_empty_result():
    features = signature([], {}, n_classes=None)
    assert features["n_losses"] == 0
    assert features["optimizer_steps"] == 0
    assert features["time_per_step"] is None


def test_loss_at_step_zero_already_nan():
    features = signature(backward(["nan", 2.0]), {}, n_classes=None)
    assert features["first_nan_step"] == 0
    assert features["initial_loss"] is None
    assert features["diverged"] == 1


def test_loss_falls_back_to_loss_fn_then_to_reported_train_loss():
    loss_fn = [{"kind": "loss_fn", "i": i, "loss": 2.0 - 0.01 * i} for i in range(50)]
    steps, values, source = loss_curve(loss_fn)
    assert source == "loss_fn" and values.size == 50 and steps[-1] == 49
    reports = [{"kind": "report", "epoch": e, "train_loss": 2.0 / (e + 1)} for e in range(4)]
    _, values, source = loss_curve(reports)
    assert source == "report" and values.tolist() == pytest.approx([2.0, 1.0, 2 / 3, 0.5])
    assert signature(reports, {}, n_classes=None)["final_over_initial"] == pytest.approx(0.25)
    _, values, source = loss_curve([*loss_fn, *backward([3.0, 2.0])])
    assert source == "backward" and values.tolist() == [3.0, 2.0]


def test_spikes_are_counted_against_the_running_median():
    losses = np.full(200, 1.0)
    losses[[60, 120, 180]] = 5.0
    assert signature(backward(losses.tolist()), {}, n_classes=None)["spike_count"] == 3
    small_bumps = np.full(200, 1.0)
    small_bumps[[60, 120]] = 1.5
    assert signature(backward(small_bumps.tolist()), {}, n_classes=None)["spike_count"] == 0


def test_zig_zag_and_monotone_sign_changes():
    zig_zag = [1.0 + 0.1 * (i % 2) for i in range(100)]
    monotone = [2.0 - 0.01 * i for i in range(100)]
    assert signature(backward(zig_zag), {}, n_classes=None)["sign_change_rate"] == 1.0
    assert signature(backward(monotone), {}, n_classes=None)["sign_change_rate"] == 0.0
    jumpy = signature(backward(zig_zag), {}, n_classes=None)["tv_norm"]
    smooth = signature(backward(monotone), {}, n_classes=None)["tv_norm"]
    assert jumpy > 5 * smooth


def test_memory_growth_per_step():
    assert features_of("leak_memory")["mem_growth_mb_per_step"] == pytest.approx(0.25, abs=0.02)
    assert abs(features_of("healthy")["mem_growth_mb_per_step"]) < 0.02


def test_eval_mode_and_grad_in_eval_fractions():
    assert features_of("eval_mode")["eval_mode_train_frac"] == 1.0
    features = features_of("grad_in_eval")
    assert features["eval_grad_frac"] == 1.0
    assert features["eval_forwards_grad"] == 50


def test_classes_from_reports_and_chance_override():
    records = [*backward([2.3, 2.0]), {"kind": "report", "val_metric": 0.6, "n_classes": 10}]
    features = signature(records, {}, n_classes=None)
    assert features["init_loss_ratio"] == pytest.approx(2.3 / math.log(10))
    assert features["val_metric_vs_chance"] == pytest.approx(0.5)
    records.append({"kind": "report", "val_metric": 0.7, "chance": 0.5})
    assert signature(records, {}, n_classes=None)["val_metric_vs_chance"] == pytest.approx(0.2)
    assert signature(backward([2.3, 2.0]), {}, n_classes=None)["init_loss_ratio"] is None


def test_train_val_gap_falls_back_to_the_curve_when_train_loss_is_not_reported():
    records = [*backward([1.0] * 40), {"kind": "report", "val_loss": 1.5}]
    assert signature(records, {}, n_classes=None)["train_val_gap"] == pytest.approx(0.5)


def test_wall_time_per_step_when_steps_carry_no_timing():
    result = {"wall_s": 10.0, "steps": 100}
    assert signature([], result, n_classes=None)["time_per_step"] == pytest.approx(0.1)


def test_divergence_flag_on_a_rising_curve():
    features = features_of("diverge")
    assert features["diverged"] == 1
    assert features["max_over_initial"] > 10


def test_a_blow_up_at_the_first_update_is_a_spike_and_a_peak():
    losses = [2.3, 95.0, 22.0, 4.0, *([2.3] * 100)]
    features = signature(backward(losses), {}, n_classes=None)
    assert features["spike_count"] >= 1
    assert features["peak_over_initial"] == pytest.approx(95.0 / 2.3)
    assert features["max_over_initial"] < 3.0  # the smoothed curve ignores a short blow-up


def test_training_time_spans_the_loss_records():
    records = [{"kind": "backward", "i": i, "loss": 1.0, "t": 2.0 + 0.5 * i} for i in range(11)]
    assert signature(records, {}, n_classes=None)["train_time_s"] == pytest.approx(5.0)
