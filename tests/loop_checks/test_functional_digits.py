"""The training checks on reference_loops/functional_digits.py (see loop_suite.py for how)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from loop_suite import *  # noqa: F403  (the shared check tests)
from loop_suite import Parts, captured_main, epoch_function_parts

from trainwreck.checks import expected_lrs


def nll_of_log_softmax(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The loop's loss, written out: its step computes it inline."""
    return F.nll_loss(F.log_softmax(logits, dim=1), targets)


def build() -> Parts:
    loop, captured = captured_main("functional_digits")
    return epoch_function_parts(
        loop,
        captured,
        loss_fn=nll_of_log_softmax,
        expected_loss=math.log(10),
        n_batches=21,
        min_drop=0.15,  # about half the correct loop's drop
        overfit_steps=60,
        # The correct schedule over 6 epochs: cosine from 0.02 (T_max = the epochs).
        schedule=("functional_digits", [0.02, *expected_lrs(cosine, 0.02, 5)]),
    )


def cosine(optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler:
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=6)


@pytest.fixture
def parts() -> Parts:
    return build()
