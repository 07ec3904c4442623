"""The training checks on reference_loops/char_lm.py (see loop_suite.py for how)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from loop_suite import *  # noqa: F403  (the shared check tests)
from loop_suite import Parts, captured_main, epoch_function_parts

from trainwreck.checks import check_next_token_targets


def flat_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The loop's loss, written out: its step computes it inline."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def build() -> Parts:
    loop, captured = captured_main("char_lm")
    vocab = captured["model"].head.out_features
    return epoch_function_parts(
        loop,
        captured,
        loss_fn=flat_cross_entropy,
        expected_loss=math.log(vocab),
        label_check=check_next_token_targets,
        n_batches=21,
        n_labels=64,
        min_drop=0.1,  # about half the correct loop's drop
        overfit_steps=80,
    )


@pytest.fixture
def parts() -> Parts:
    return build()
