"""trainwreck.checks, loss checks: each fails on the bug it targets and passes when correct."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from checks_fixtures import (
    MLP,
    N_CLASSES,
    BatchMixingMLP,
    adam,
    blobs,
    fresh,
    linear_targets,
    step_fn,
    zero_init,
)

from trainwreck.checks import (
    CheckFailed,
    check_initial_loss,
    check_loss_decreases,
    check_overfit_batch,
    expected_initial_loss,
    make_train_step,
)

LN_C = math.log(N_CLASSES)


def batches(n_batches: int = 9, size: int = 32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    x, y = blobs(n_batches * size)
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(x), size)]


def test_expected_initial_loss_per_kind():
    assert expected_initial_loss("cross_entropy", num_classes=10) == pytest.approx(math.log(10))
    assert expected_initial_loss("nll", num_classes=2) == pytest.approx(math.log(2))
    assert expected_initial_loss("bce") == pytest.approx(math.log(2))
    assert expected_initial_loss("mse", targets=torch.tensor([1.0, -1.0, 2.0])) == pytest.approx(2)
    with pytest.raises(ValueError, match="num_classes"):
        expected_initial_loss("cross_entropy")
    with pytest.raises(ValueError, match="one of"):
        expected_initial_loss("hinge")


def test_initial_loss_passes_at_ln_c():
    model, (x, y) = fresh(), blobs()
    value = check_initial_loss(lambda: F.cross_entropy(model(x), y), expected=LN_C)
    assert abs(value - LN_C) < 0.1 * LN_C


def test_initial_loss_fails_on_sum_reduction():
    model, (x, y) = fresh(), blobs()
    with pytest.raises(CheckFailed, match="Too high: a sum reduction"):
        check_initial_loss(F.cross_entropy(model(x), y, reduction="sum"), expected=LN_C)


def test_initial_loss_fails_on_mse_against_one_hot_targets():
    model, (x, y) = fresh(), blobs()
    loss = F.mse_loss(model(x), F.one_hot(y, N_CLASSES).float())
    with pytest.raises(CheckFailed, match=r"expected an initial loss of 1.386 .*Too low"):
        check_initial_loss(loss, expected=LN_C)


def test_initial_loss_of_a_regression_is_the_mean_square_target():
    x, y = linear_targets()
    torch.manual_seed(0)
    model = torch.nn.Linear(x.size(1), 1)
    torch.nn.init.zeros_(model.weight)
    expected = expected_initial_loss("mse", targets=y)
    check_initial_loss(F.mse_loss(model(x).squeeze(1), y), expected=expected)
    with pytest.raises(CheckFailed, match="Too high"):  # outputs offset at init
        check_initial_loss(F.mse_loss(model(x) + 1.5, y.unsqueeze(1)), expected=expected)


def test_loss_decreases_on_a_correct_step():
    model = fresh()
    losses = check_loss_decreases(step_fn(model, adam(model)), batches())
    assert len(losses) == 9 and losses[-1] < losses[0]


@pytest.mark.parametrize(
    ("lr", "order"),
    [
        (1e-6, ("train", "zero_grad", "forward", "backward", "step")),  # lr 10^4 too small
        (1e-2, ("train", "zero_grad", "forward", "backward")),  # no optimizer.step()
        (1e-2, ("train", "zero_grad", "forward", "step", "backward")),  # step before backward
    ],
    ids=["lr_too_small", "no_step", "step_before_backward"],
)
def test_loss_decreases_fails_when_nothing_is_learned(lr, order):
    model = fresh()
    with pytest.raises(CheckFailed, match="check_loss_decreases: expected the mean loss"):
        check_loss_decreases(step_fn(model, adam(model, lr), order=order), batches())


def test_loss_decreases_fails_on_a_diverging_learning_rate():
    model = fresh()
    step = step_fn(model, torch.optim.SGD(model.parameters(), lr=1e3))
    with pytest.raises(CheckFailed, match="check_loss_decreases"):
        check_loss_decreases(step, batches())


def test_overfit_batch_passes_on_a_correct_step():
    model, batch = fresh(), blobs(32)
    losses = check_overfit_batch(batch, step_fn(model, adam(model)), steps=100)
    assert losses[-1] < 0.1 * losses[0]


def test_overfit_batch_fails_on_softmax_before_cross_entropy():
    model, batch = fresh(), blobs(32)
    capped = step_fn(model, adam(model), lambda out, y: F.cross_entropy(out.softmax(1), y))
    with pytest.raises(CheckFailed, match="cannot memorise one batch"):
        check_overfit_batch(batch, capped, steps=100)


def test_overfit_batch_fails_on_nll_of_raw_logits():
    model, batch = fresh(), blobs(32)
    with pytest.raises(CheckFailed, match="losses >= 0"):
        check_overfit_batch(batch, step_fn(model, adam(model), F.nll_loss), steps=100)


def test_overfit_batch_fails_on_a_zero_initialised_model():
    model, batch = zero_init(fresh()), blobs(32)
    with pytest.raises(CheckFailed, match="check_overfit_batch"):
        check_overfit_batch(batch, step_fn(model, adam(model)), steps=100)


def test_overfit_batch_cannot_see_mixing_inside_a_fixed_batch():
    # Documented limit: a fixed batch mixed the same way every time is still memorisable.
    model, batch = fresh(BatchMixingMLP), blobs(32)
    check_overfit_batch(batch, step_fn(model, adam(model)), steps=100)


def test_make_train_step_trains_with_the_factory_optimizer():
    model, batch = fresh(), blobs(32)
    step = make_train_step(model, F.cross_entropy, lambda ps: torch.optim.Adam(ps, lr=1e-2))
    check_overfit_batch(batch, step, steps=100)


def test_checks_leave_the_global_rng_alone():
    model, batch = fresh(MLP), blobs(32)
    state = torch.get_rng_state()
    check_overfit_batch(batch, step_fn(model, adam(model)), steps=20, max_ratio=1.0)
    assert torch.equal(torch.get_rng_state(), state)


def test_checks_are_deterministic():
    runs = []
    for _ in range(2):
        model = fresh()
        runs.append(check_loss_decreases(step_fn(model, adam(model)), batches()))
    assert runs[0] == runs[1]
