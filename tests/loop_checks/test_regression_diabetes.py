"""The training checks on reference_loops/regression_diabetes.py, a loop written flat in main().

There is no step or evaluation function to call, so ``main()`` itself trains: on the first
40 patients (its 80/20 split leaves 32 for training: one batch of 32, so every step sees
the same batch), paused after each optimizer step by ``SteppedMain``. The checks get the
model ``main()`` built, the batch its own pipeline made (inputs and targets standardized
by its code) and a train step that lets ``main()`` take its next step.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from loop_suite import *  # noqa: F403  (the shared check tests)
from loop_suite import Parts, load_loop
from stepped_main import SteppedMain

from trainwreck.checks import check_labels_aligned, check_train_step_mode

N_PATIENTS = 40  # int(40 * 0.8) = 32 train patients = one batch at the default batch size


def column_mse(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The loop's loss, written out: (n, 1) predictions against (n,) targets made (n, 1)."""
    return F.mse_loss(pred, y.unsqueeze(1))


def build(patients: int | None = N_PATIENTS) -> Iterator[Parts]:
    loop = load_loop("regression_diabetes")
    data = loop.load_diabetes()
    loop.load_diabetes = lambda: SimpleNamespace(
        data=data.data[:patients], target=data.target[:patients]
    )
    made: list[tuple[torch.Tensor, ...]] = []

    class RecordedDataset(loop.TensorDataset):  # the first one main() builds is the train set
        def __init__(self, *tensors: torch.Tensor):
            made.append(tensors)
            super().__init__(*tensors)

    loop.TensorDataset = RecordedDataset
    with SteppedMain(loop.main, ["--seed", "0", "--epochs", "400"]) as run:
        batch = made[0]

        def train_step(b: tuple[torch.Tensor, ...]) -> float:
            assert b is batch, "main() trains on its own batch only"
            return run.step()

        yield Parts(
            model=run.model,
            batch=batch,
            train_step=train_step,
            loss_fn=column_mse,
            evaluate=lambda: None,
            batches=[batch] * 12,
            labels=batch,
            expected_loss=1.0,
            initial_tol=0.2,  # ~1.0: near-zero predictions of standardized targets
            min_drop=0.1,
            # Its exponential schedule (x0.95 per step here: one step per epoch) and dropout
            # hold the loss near 0.55 of its start from step 50 on.
            overfit_steps=60,
            overfit_ratio=0.75,
        )


@pytest.fixture
def parts() -> Iterator[Parts]:
    yield from build()


def test_evaluation(parts: Parts) -> None:
    pytest.skip("evaluation is written inline in main(): no function a test can call")


def test_train_step_mode(parts: Parts) -> None:
    # main() is paused inside its first forward: finish that step; the next one follows
    # main()'s own evaluation, which left the model in eval mode.
    parts.train_step(parts.batch)
    check_train_step_mode(parts.model, parts.batch, parts.train_step, from_eval=False)


def test_labels_aligned() -> None:
    # Every patient: the one-batch run's 32 are too few to tell a relation from chance.
    for parts in build(patients=None):
        check_labels_aligned(*parts.labels)
