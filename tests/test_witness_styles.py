"""Witnesses of the operators no reference loop has a site for, on the style scripts that
have one (tests/styles), through the harness: each run against the unmutated script's run
on its seed (experiments.witness)."""

from __future__ import annotations

import pytest

from experiments.harness import run_sweep
from experiments.sweep import Loop, Sweep, build
from experiments.witness import CONFIRMED, UNCONFIRMED, decide, decide_runs, operator_parts

pytestmark = pytest.mark.slow

CASES = {
    "channels_last_cifar": (
        dict(epochs=2, device_arg=None),
        ("view_instead_of_permute", "drop_sampler_set_epoch"),
    ),
    "dcgan": (dict(epochs=1, epochs_arg="--niter"), ("gan_fake_not_detached",)),
    "imagenet_trainer": (dict(epochs=1), ("amp_without_grad_scaler", "augment_validation")),
    "padded_char_lm": (dict(epochs=1, device_arg=None), ("padding_counted_in_loss",)),
    "nanogpt_trainer": (
        dict(
            argv_text="--max_iters=20 --eval_interval=10 --eval_iters=2",
            epochs_arg=None,
            device_arg=None,
            seed_arg="--seed=",
        ),
        ("clip_without_unscale",),
    ),
}
EXPECTED = {
    "view_instead_of_permute": (CONFIRMED, "train_inputs differ"),
    # The order repeats from the second epoch: forward 40 is the first sample there.
    "drop_sampler_set_epoch": (CONFIRMED, "train_inputs differ from #40"),
    "gan_fake_not_detached": (CONFIRMED, "crashed as its bug does"),
    "augment_validation": (CONFIRMED, "eval_inputs differ"),
    # The script enables its GradScaler on CUDA only.
    "amp_without_grad_scaler": (UNCONFIRMED, "the reference has no scaler_scale either"),
    "padding_counted_in_loss": (CONFIRMED, "loss_call"),
    # Its GradScaler is enabled for float16 on CUDA only: nothing to unscale on the CPU.
    "clip_without_unscale": (UNCONFIRMED, "the reference has no scaler_unscale either"),
}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("styles")
    found = {}
    for style, (options, operators) in CASES.items():
        loop = Loop(script=f"tests/styles/{style}.py", **options)
        specs = build(Sweep(loops=[loop], operators=list(operators), seeds=[0]))
        rows = run_sweep(specs, folder, workers=2)
        for row, verdict in zip(rows, decide_runs(rows)):
            if verdict is not None:
                found[row["operators"][0]] = verdict
    return found


@pytest.mark.parametrize("operator", sorted(EXPECTED))
def test_the_witness_of_an_operator_without_a_reference_loop_site(verdicts, operator):
    state, text = EXPECTED[operator]
    assert verdicts[operator].state == state, verdicts[operator].text
    assert text in verdicts[operator].text


# The operators that stand for real faults (issue 32): every mutant of each in the scripts
# below, on two seeds, against the unmutated script's run on its seed.
REAL_FAULT_CASES = {
    "actor_critic_chain": (
        dict(epochs=20, epochs_arg="--episodes", device_arg=None),
        (
            "wrong_network_in_loss",
            "drop_detach_in_loss",
            "hoist_loop_reset",
            "optimizer_misses_params",
            "last_item_instead_of_list",
            "drop_loss_reduction",
        ),
    ),
    "two_head_focal": (
        dict(epochs=2, device_arg=None),
        (
            "swap_loss_targets",
            "softmax_overwrites_logits",
            "metric_into_train_accumulator",
            "clamp_bound_flipped",
            "drop_class_weight_term",
        ),
    ),
    "wgan_gp_toy": (
        dict(epochs=20, epochs_arg="--iterations", device_arg=None),
        (
            "stale_fake_in_generator_loss",
            "interpolation_weight_per_element",
            "loss_weight_applied_twice",
        ),
    ),
    "sine_tokens_lm": (
        dict(epochs=40, epochs_arg="--steps", device_arg=None),
        ("linspace_includes_endpoint", "flatten_all_dims_before_loss"),
    ),
    "mnist_nll": (dict(epochs=1, device_arg=None), ("dropout_on_logits",)),
    "vae": (dict(epochs=1), ("to_device_not_assigned",)),
}
REFERENCE_LOOP_CASES = {
    "regression_diabetes": (dict(epochs=3), ("train_mode_outside_loop", "normalize_by_wrong_stat")),
    "char_lm": (dict(epochs=1), ("clip_per_micro_step",)),
}
# Every run of the operator has the state; at least one says the text.
REAL_FAULT_EXPECTED = {
    "wrong_network_in_loss": (CONFIRMED, "forward_order #"),
    "drop_detach_in_loss": (CONFIRMED, "gradient flows through the term the fix detached (4 vs 2)"),
    "hoist_loop_reset": (CONFIRMED, "the inner loop runs in the first outer iteration only"),
    "optimizer_misses_params": (CONFIRMED, "(4 vs 0)"),
    "last_item_instead_of_list": (CONFIRMED, "train_inputs differ"),
    "drop_loss_reduction": (CONFIRMED, "only for scalar outputs"),
    "swap_loss_targets": (CONFIRMED, "second_inputs differ from #0"),
    "softmax_overwrites_logits": (CONFIRMED, "cross-entropy gets probabilities"),
    "metric_into_train_accumulator": (CONFIRMED, "reported differ from #0"),
    "clamp_bound_flipped": (CONFIRMED, "the clamp cuts the side the original left alone"),
    "drop_class_weight_term": (CONFIRMED, "different numbers: the loss loses a class-weight"),
    "stale_fake_in_generator_loss": (CONFIRMED, "(20 vs 0, first after 5 steps)"),
    "interpolation_weight_per_element": (CONFIRMED, "train_inputs differ from #0"),
    "loss_weight_applied_twice": (CONFIRMED, "losses differ from #0"),
    "linspace_includes_endpoint": (CONFIRMED, "train_inputs differ from #0"),
    "flatten_all_dims_before_loss": (CONFIRMED, "crashed as its bug does"),
    "dropout_on_logits": (CONFIRMED, "one more dropout runs"),
    "to_device_not_assigned": (UNCONFIRMED, "not observable on this device"),
    "train_mode_outside_loop": (CONFIRMED, "in eval mode"),
    "normalize_by_wrong_stat": (CONFIRMED, "train_inputs differ from #0"),
    "clip_per_micro_step": (CONFIRMED, "(66 vs 33)"),
}


def _loop(name: str, options: dict) -> Loop:
    folder = "reference_loops" if name in REFERENCE_LOOP_CASES else "tests/styles"
    return Loop(script=f"{folder}/{name}.py", **options)


@pytest.fixture(scope="module")
def real_fault_runs(tmp_path_factory):
    """Per operator, (verdict, row) of each of its runs; and per script, its unmutated
    run on seed 0 decided as each operator's mutant against a second unmutated run."""
    folder, again = tmp_path_factory.mktemp("faults"), tmp_path_factory.mktemp("again")
    runs: dict[str, list] = {}
    silent: dict[tuple[str, str], object] = {}
    for name, (options, operators) in {**REAL_FAULT_CASES, **REFERENCE_LOOP_CASES}.items():
        loop = _loop(name, options)
        rows = run_sweep(
            build(Sweep(loops=[loop], operators=list(operators), seeds=[0, 1])), folder
        )
        for row, verdict in zip(rows, decide_runs(rows)):
            if verdict is not None:
                runs.setdefault(row["operators"][0], []).append((verdict, row))
        first = next(r for r in rows if not r["operators"] and r["seed"] == 0)
        second = run_sweep(build(Sweep(loops=[loop], seeds=[0])), again)[0]
        for operator in operators:
            parts = operator_parts([operator], [{}])
            silent[(name, operator)] = decide(parts, second, first)
    return runs, silent


def test_every_real_fault_operator_is_covered():
    from mutations.registry import operator_classes

    named = {op for _, ops in {**REAL_FAULT_CASES, **REFERENCE_LOOP_CASES}.values() for op in ops}
    assert named == set(REAL_FAULT_EXPECTED)
    assert named <= set(operator_classes())


@pytest.mark.parametrize("operator", sorted(REAL_FAULT_EXPECTED))
def test_the_witness_of_a_real_fault_operator_fires_on_its_mutants(real_fault_runs, operator):
    state, text = REAL_FAULT_EXPECTED[operator]
    found = real_fault_runs[0][operator]
    assert {row["seed"] for _, row in found} == {0, 1}
    assert all(verdict.state == state for verdict, _ in found), [v.text for v, _ in found]
    assert any(text in verdict.text for verdict, _ in found), [v.text for v, _ in found]


def test_the_witnesses_stay_silent_on_the_unmutated_script(real_fault_runs):
    fired = {key: v.text for key, v in real_fault_runs[1].items() if v.state != UNCONFIRMED}
    assert fired == {}
