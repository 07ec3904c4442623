"""Witnesses of the operators no reference loop has a site for, on the style scripts that
have one (tests/styles), through the harness: each run against the unmutated script's run
on its seed (experiments.witness)."""

from __future__ import annotations

import pytest

from experiments.harness import run_sweep
from experiments.sweep import Loop, Sweep, build
from experiments.witness import CONFIRMED, UNCONFIRMED, decide_runs

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
