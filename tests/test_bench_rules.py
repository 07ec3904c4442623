"""trainwreck-rules on synthetic traces: each rule fires on its symptom, at the right step,
and stays silent on a healthy run."""

from __future__ import annotations

import pytest
from test_bench_support import decreasing, synthetic_records

from experiments.bench.rules import RulesConfig, check_records


def rules_fired(records, **config):
    return {finding.rule: finding for finding in check_records(records, RulesConfig(**config))}


def test_healthy_run_fires_nothing():
    assert rules_fired(synthetic_records(decreasing())) == {}


def test_no_update_fires_after_patience_steps():
    fired = rules_fired(synthetic_records(decreasing(), update_ratio=0.0), patience=5)
    assert fired["no_update"].step == 5
    assert fired["no_update"].category == "gradient"


def test_vanishing_and_exploding_gradients():
    assert "vanishing_gradients" in rules_fired(synthetic_records(decreasing(), grad_norm=0.0))
    exploding = rules_fired(synthetic_records(decreasing(), grad_norm=1e6))
    assert exploding["exploding_gradients"].step == RulesConfig().patience


def test_nan_loss_reports_the_step_it_appeared_at():
    losses = [*decreasing(30), float("nan")]
    fired = rules_fired(synthetic_records(losses))
    assert fired["nan_loss"].step == 30
    assert fired["nan_loss"].category == "numerics"


def test_flat_loss_is_not_decreasing_and_fires_once_judged():
    fired = rules_fired(synthetic_records([2.3] * 100))
    # judged at the 60th loss (min_steps_for_progress), seen after 59 optimizer steps
    assert fired["loss_not_decreasing"].step == 59
    assert "loss_not_decreasing" not in rules_fired(synthetic_records([2.3] * 40))


def test_diverging_and_oscillating():
    growing = [1.0 * 1.05**i for i in range(80)]
    assert "diverging" in rules_fired(synthetic_records(growing))
    zigzag = [2.0 + (0.5 if i % 2 else -0.5) - i * 0.001 for i in range(80)]
    assert "oscillating" in rules_fired(synthetic_records(zigzag))


def test_mode_rules_read_the_forward_counters():
    fired = rules_fired(
        synthetic_records(decreasing(), eval_mode_fraction=0.9, eval_forwards_grad=3)
    )
    assert fired["eval_mode_training"].category == "mode"
    assert fired["grad_in_eval"].category == "mode"


def test_memory_growth_needs_a_slope():
    assert "memory_growth" in rules_fired(synthetic_records(decreasing(), rss_per_step=2.0))
    assert "memory_growth" not in rules_fired(synthetic_records(decreasing(), rss_per_step=0.01))


def test_backward_without_step_and_step_without_backward():
    assert "no_step" in rules_fired(synthetic_records(decreasing(20), steps=False))
    only_steps = [r for r in synthetic_records(decreasing(20)) if r["kind"] != "backward"]
    assert "no_backward" in rules_fired(only_steps)


def test_thresholds_are_configurable_and_typos_fail():
    records = synthetic_records(decreasing(), grad_norm=50.0)
    assert "exploding_gradients" not in rules_fired(records)
    assert "exploding_gradients" in rules_fired(records, exploding_grad_norm=10.0)
    assert RulesConfig.from_options({"patience": "3"}).patience == 3
    with pytest.raises(ValueError, match="unknown rules setting"):
        RulesConfig.from_options({"patiense": 3})


def test_suspicion_counts_the_distinct_rules_that_fired():
    from experiments.bench.api import RunInput
    from experiments.bench.rules import TrainwreckRules

    rules = TrainwreckRules()
    assert rules.scored
    healthy = RunInput(synthetic_records(decreasing()), {})
    assert rules.suspicion(healthy) == 0.0
    broken = RunInput(synthetic_records(decreasing(), update_ratio=0.0, eval_mode_fraction=1.0), {})
    fired = {finding.rule for finding in rules.check_run(broken)}
    assert {"no_update", "eval_mode_training"} <= fired
    assert rules.suspicion(broken) == float(len(fired))
