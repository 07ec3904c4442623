"""trainwreck.checks on gradients, steps, batch independence and modes: each fails on the
bug it targets (built directly) and passes on the correct setup."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from checks_fixtures import (
    MLP,
    AlwaysDropoutMLP,
    BatchMixingMLP,
    BatchNormNet,
    DetachedMLP,
    TokenModel,
    adam,
    blobs,
    fresh,
    step_fn,
    zero_init,
)

from trainwreck.checks import (
    CheckFailed,
    check_batch_independence,
    check_evaluation,
    check_gradients,
    check_params_change,
    check_train_eval_modes,
    check_train_step_mode,
)

CORRECT = ("train", "zero_grad", "forward", "backward", "step")


def test_gradients_pass_and_leave_grads_and_modes_alone():
    model = fresh()
    model.eval()
    marker = torch.ones_like(model.fc1.weight)
    model.fc1.weight.grad = marker
    check_gradients(model, blobs(32), F.cross_entropy)
    assert model.fc1.weight.grad is marker and model.fc2.weight.grad is None
    assert not model.training


def test_gradients_fail_on_a_detached_layer():
    with pytest.raises(CheckFailed, match=r"no gradient for fc1.weight, fc1.bias"):
        check_gradients(fresh(DetachedMLP), blobs(32), F.cross_entropy)


def test_gradients_ignore_names_what_should_not_train():
    check_gradients(fresh(DetachedMLP), blobs(32), F.cross_entropy, ignore=["fc1"])


def test_gradients_fail_on_zero_init():
    with pytest.raises(CheckFailed, match=r"all-zero gradient for fc1.weight"):
        check_gradients(zero_init(fresh()), blobs(32), F.cross_entropy)


def test_gradients_fail_on_a_loss_rebuilt_from_item():
    def from_item(out, y):
        return torch.tensor(F.cross_entropy(out, y).item(), requires_grad=False)

    with pytest.raises(CheckFailed, match=r"rebuilt from .item"):
        check_gradients(fresh(), blobs(32), from_item)


def test_params_change_on_a_correct_step():
    model = fresh()
    check_params_change(model, blobs(32), step_fn(model, adam(model)))


@pytest.mark.parametrize(
    "order",
    [
        ("train", "zero_grad", "forward", "backward"),  # no step
        ("train", "zero_grad", "forward", "step"),  # no backward
        ("train", "forward", "backward", "zero_grad", "step"),  # zero_grad after backward
        ("train", "zero_grad", "forward", "step", "backward"),  # step before backward
    ],
    ids=["no_step", "no_backward", "zero_grad_after_backward", "step_before_backward"],
)
def test_params_change_fails_when_the_step_changes_nothing(order):
    model = fresh()
    with pytest.raises(CheckFailed, match=r"The step changes nothing"):
        check_params_change(model, blobs(32), step_fn(model, adam(model), order=order))


def test_params_change_fails_on_an_optimizer_of_a_stale_model():
    stale = fresh()
    model = fresh(seed=1)  # re-created after its optimizer was built
    with pytest.raises(CheckFailed, match=r"4 unchanged"):
        check_params_change(model, blobs(32), step_fn(model, adam(stale)))


def test_params_change_fails_on_an_optimizer_given_the_last_layer_only():
    model = fresh()
    step = step_fn(model, torch.optim.Adam(model.fc2.parameters(), lr=1e-2))
    with pytest.raises(CheckFailed, match=r"2 unchanged: fc1.weight, fc1.bias. These never"):
        check_params_change(model, blobs(32), step)


@pytest.mark.parametrize("cls", [MLP, BatchNormNet], ids=["mlp", "batchnorm"])
def test_batch_independence_passes_on_correct_models(cls):
    model = fresh(cls)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    check_batch_independence(model, blobs(16)[0], sample=3)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert model.training


def test_batch_independence_fails_on_a_batch_mixing_reshape():
    with pytest.raises(CheckFailed, match=r"non-zero gradient from"):
        check_batch_independence(fresh(BatchMixingMLP), blobs(16)[0])


def test_batch_norm_mixes_samples_in_train_mode_which_is_why_eval_is_the_default():
    with pytest.raises(CheckFailed, match=r"check_batch_independence"):
        check_batch_independence(fresh(BatchNormNet), blobs(16)[0], train_mode=True)


def test_batch_independence_on_token_ids():
    tokens = torch.randint(0, 12, (6, 10), generator=torch.Generator().manual_seed(0))
    check_batch_independence(fresh(TokenModel), tokens, sample=2)
    with pytest.raises(CheckFailed, match=r"unchanged when only the other samples change"):
        check_batch_independence(fresh(TokenModel, mix=True), tokens, sample=2)


def test_batch_independence_says_what_a_forward_must_return():
    with pytest.raises(ValueError, match=r"batch .16. along dim 0"):
        check_batch_independence(fresh(), blobs(16)[0], forward=lambda m, x: m(x).t())


@pytest.mark.parametrize("cls", [MLP, BatchNormNet], ids=["dropout", "batchnorm"])
def test_train_eval_modes_pass_on_correct_models(cls):
    check_train_eval_modes(fresh(cls), blobs(16)[0])


def test_train_eval_modes_fail_on_dropout_that_ignores_the_mode():
    with pytest.raises(CheckFailed, match=r"training=self.training"):
        check_train_eval_modes(fresh(AlwaysDropoutMLP), blobs(16)[0])


def test_train_eval_modes_fail_on_dropout_forced_off():
    model = fresh()
    model.dropout.eval()
    model.dropout.train = lambda mode=True: model.dropout  # pinned in eval mode
    with pytest.raises(CheckFailed, match=r"differ from eval-mode ones"):
        check_train_eval_modes(model, blobs(16)[0])


def test_train_step_mode_passes_when_the_step_calls_train():
    model = fresh()
    check_train_step_mode(model, blobs(32), step_fn(model, adam(model)))


@pytest.mark.parametrize(
    "order",
    [CORRECT[1:], ("eval", *CORRECT[1:])],
    ids=["no_train_call", "eval_instead_of_train"],
)
def test_train_step_mode_fails_when_training_runs_in_eval_mode(order):
    model = fresh()
    with pytest.raises(CheckFailed, match=r"eval mode during training for model, dropout"):
        check_train_step_mode(model, blobs(32), step_fn(model, adam(model), order=order))


def evaluate(model, batch, *, set_eval=True, no_grad=True):
    """Mean loss and accuracy; the keywords drop model.eval() or torch.no_grad()."""
    x, y = batch
    if set_eval:
        model.eval()
    with torch.set_grad_enabled(not no_grad):
        out = model(x)
    return F.cross_entropy(out, y).item(), (out.argmax(1) == y).float().mean().item()


@pytest.mark.parametrize("cls", [MLP, BatchNormNet], ids=["dropout", "batchnorm"])
def test_evaluation_passes_when_correct(cls):
    model, batch = fresh(cls), blobs(64)
    result = check_evaluation(model, lambda: evaluate(model, batch))
    assert result == evaluate(model, batch)


def test_evaluation_fails_without_eval_on_batch_norm():
    model, batch = fresh(BatchNormNet), blobs(64)
    with pytest.raises(CheckFailed, match=r"changes in net.1.running_mean"):
        check_evaluation(model, lambda: evaluate(model, batch, set_eval=False))


def test_evaluation_fails_without_eval_on_dropout():
    model, batch = fresh(), blobs(64)
    with pytest.raises(CheckFailed, match=r"Call model.eval"):
        check_evaluation(model, lambda: evaluate(model, batch, set_eval=False))


def test_evaluation_fails_without_no_grad():
    model, batch = fresh(), blobs(64)
    with pytest.raises(CheckFailed, match=r"torch.no_grad"):
        check_evaluation(model, lambda: evaluate(model, batch, no_grad=False))


def test_evaluation_fails_when_it_is_random():
    model, batch = fresh(AlwaysDropoutMLP), blobs(64)
    with pytest.raises(CheckFailed, match=r"the same result from two evaluations"):
        check_evaluation(model, lambda: evaluate(model, batch))


def test_train_step_mode_can_start_from_the_mode_the_loop_left():
    model = fresh()
    step = step_fn(model, adam(model), order=CORRECT[1:])  # never calls model.train()
    check_train_step_mode(model, blobs(32), step, from_eval=False)  # still in train mode
    model.eval()
    with pytest.raises(CheckFailed, match="eval mode during training"):
        check_train_step_mode(model, blobs(32), step, from_eval=False)


def test_train_step_mode_ignores_an_evaluation_without_no_grad_inside_the_step():
    model = fresh()
    train = step_fn(model, adam(model))

    def step_then_evaluate(batch):
        loss = train(batch)
        evaluate(model, batch, no_grad=False)  # eval mode, graph built, never backpropagated
        return loss

    check_train_step_mode(model, blobs(32), step_then_evaluate)


def test_train_step_mode_fails_when_nothing_is_backpropagated():
    model = fresh()
    order = ("train", "zero_grad", "forward", "step")  # no backward
    with pytest.raises(CheckFailed, match="none backpropagated"):
        check_train_step_mode(model, blobs(32), step_fn(model, adam(model), order=order))
