"""The training checks on reference_loops/binary_cancer.py (see loop_suite.py for how).

Its step lives in a ``Trainer`` class: the recorder stops ``main()`` at the trainer's first
``train_one_epoch`` and the checks call that method (and ``evaluate``) on their batches.
"""

from __future__ import annotations

import math

import pytest
import torch
from loop_suite import *  # noqa: F403  (the shared check tests)
from loop_suite import Parts, capture_call, draw, load_loop, one_batch_loader, take


def squeezed(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x).squeeze(1)  # the loop's own forward: (n, 1) logits -> (n,)


def build() -> Parts:
    loop = load_loop("binary_cancer")
    captured = capture_call(loop.Trainer, "train_one_epoch", lambda: loop.main(["--seed", "0"]))
    trainer, loader = captured["self"], captured["loader"]
    batch, *batches = draw(loader, 10)
    labels = take(loader, 256)
    return Parts(
        model=trainer.model,
        batch=batch,
        train_step=lambda b: trainer.train_one_epoch(one_batch_loader(b)),
        loss_fn=trainer.criterion,
        forward=squeezed,
        evaluate=lambda: trainer.evaluate(one_batch_loader(labels)),
        batches=batches,
        labels=labels,
        expected_loss=math.log(2),
        min_drop=0.04,  # about half the correct loop's drop
        overfit_steps=200,
    )


@pytest.fixture
def parts() -> Parts:
    return build()
