"""Training checks a project calls from its own tests (public as ``trainwreck.checks``).

Each check is one function that raises ``CheckFailed`` (an ``AssertionError``) saying what
it expected and what it saw. They take the project's pieces, never trainwreck's loops: a
model, a batch ``(inputs, targets)``, a loss function ``loss_fn(outputs, targets)``, an
optional ``forward(model, inputs)`` when calling the model takes more than ``model(x)``,
and a ``train_step(batch) -> loss`` (the project's own step, or ``make_train_step`` from
a loss and an optimizer factory). Torch only; CPU-sized; seeded, so a check gives the same
verdict every run and leaves the global RNG where it was. docs/checks.md lists what each
one catches and what it cannot.
"""

from experiments.checks._common import CheckFailed
from experiments.checks.gradients import check_gradients, check_params_change
from experiments.checks.independence import check_batch_independence
from experiments.checks.labels import check_labels_aligned, check_next_token_targets
from experiments.checks.loaders import check_loader_shuffles
from experiments.checks.losses import (
    check_initial_loss,
    check_loss_decreases,
    check_overfit_batch,
    expected_initial_loss,
)
from experiments.checks.modes import (
    check_evaluation,
    check_train_eval_modes,
    check_train_step_mode,
)
from experiments.checks.schedules import (
    check_lr_changes,
    check_lr_schedule,
    check_lr_trace,
    check_plateau_reaction,
    expected_lrs,
    lr_trace,
)
from experiments.checks.steps import (
    make_fit_step,
    make_train_step,
    one_batch_loader,
    recorded_losses,
)

__all__ = [
    "CheckFailed",
    "check_batch_independence",
    "check_evaluation",
    "check_gradients",
    "check_initial_loss",
    "check_labels_aligned",
    "check_loader_shuffles",
    "check_loss_decreases",
    "check_lr_changes",
    "check_lr_schedule",
    "check_lr_trace",
    "check_next_token_targets",
    "check_overfit_batch",
    "check_params_change",
    "check_plateau_reaction",
    "check_train_eval_modes",
    "check_train_step_mode",
    "expected_initial_loss",
    "expected_lrs",
    "lr_trace",
    "make_fit_step",
    "make_train_step",
    "one_batch_loader",
    "recorded_losses",
]
