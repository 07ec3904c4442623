"""The sequential rule of adaptive seeds (experiments/symptoms/sequential.py)."""

import random

import pytest

from experiments.symptoms.sequential import (
    ALPHA,
    BETA,
    MAX_SEEDS,
    P0,
    P1,
    decide,
    error_rates,
    first_passage,
    sprt,
)


def test_three_agreeing_seeds_decide_a_clear_difference():
    crashed = decide(["crash"] * 3, [["crash:ValueError"]] * 3)
    assert crashed.decided and crashed.reason == "decided at 3 seeds"
    silent = decide(["silent"] * 3, [["silent"]] * 3)
    assert silent.decided


def test_two_of_three_keeps_sampling_and_names_the_open_indicator():
    borderline = decide(["degrades", "silent", "degrades"], [["worse_model"], [], ["worse_model"]])
    assert not borderline.decided
    assert "worse_model 2/3" in borderline.reason
    assert ">=degrades 2/3" in borderline.undecided


def test_an_unstable_symptom_alone_keeps_sampling():
    labels = [["oscillates"], [], ["oscillates"], [], ["oscillates"]]
    decision = decide(["silent"] * 5, labels)
    assert not decision.decided and decision.undecided == ("oscillates 3/5",)


def test_alternating_seeds_stop_at_the_cap_with_the_reason():
    severities = ["degrades", "silent"] * (MAX_SEEDS // 2)
    labels = [["worse_model"], []] * (MAX_SEEDS // 2)
    decision = decide(severities, labels)
    assert decision.decided and decision.reason.startswith(f"cap {MAX_SEEDS} seeds")


def test_fewer_than_the_minimum_is_never_decided_and_invalid_always_is():
    assert not decide(["crash"] * 2, [["crash:X"]] * 2).decided
    assert decide(["silent"], [["invalid"]]).decided


def test_first_passage_ignores_seeds_after_a_boundary():
    # +3 after three seeds: later "no" seeds (run for other indicators) change nothing.
    assert first_passage([True, True, True, False, False, False]) == "on"
    assert first_passage([True, False, True, False]) is None
    assert sprt(3, 0) == "on" and sprt(0, 3) == "off" and sprt(2, 1) is None


def test_exact_error_rates_are_within_walds_bounds():
    on_at_null, _, _, _ = error_rates(P0)
    _, off_at_alternative, _, _ = error_rates(P1)
    assert on_at_null == pytest.approx(63 / 4095, abs=2e-3)
    assert on_at_null <= ALPHA and off_at_alternative <= BETA
    assert sum(error_rates(0.5)[:3]) == pytest.approx(1.0)


def test_simulated_nulls_err_within_the_stated_bound():
    """Indicators that fire with the null's rate: how often the rule calls them "on"."""
    rng = random.Random(7)
    trials = 4000
    wrong = sum(
        first_passage([rng.random() < P0 for _ in range(MAX_SEEDS)]) == "on" for _ in range(trials)
    )
    rate = wrong / trials
    assert rate <= ALPHA
    assert rate == pytest.approx(error_rates(P0)[0], abs=0.01)


def test_simulated_noop_mutants_are_mostly_decided_silent_early():
    """A mutant with no effect whose runs fire a spurious label 10% of the time."""
    rng = random.Random(3)
    seeds_used, wrong = [], 0
    for _ in range(500):
        labels: list[list[str]] = []
        while True:
            labels.append(["loss_spike"] if rng.random() < 0.1 else [])
            severities = ["degrades" if seed else "silent" for seed in labels]
            decision = decide(severities, labels)
            if decision.decided:
                break
        seeds_used.append(len(labels))
        wrong += sum(map(bool, labels)) / len(labels) >= 0.5
    assert sum(seeds_used) / len(seeds_used) < 5
    assert wrong / 500 <= ALPHA
