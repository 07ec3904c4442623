"""The training checks on reference_loops/resume_digits.py (see loop_suite.py for how)."""

from __future__ import annotations

import math

import pytest
from loop_suite import *  # noqa: F403  (the shared check tests)
from loop_suite import Parts, captured_main, epoch_function_parts


def build() -> Parts:
    loop, captured = captured_main("resume_digits")
    loss_fn, ln10 = captured["criterion"], math.log(10)
    # min_drop: about half the correct loop's drop over the same steps.
    settings = dict(n_batches=21, min_drop=0.12, overfit_steps=100)
    # The correct schedule over 12 epochs, resumed from its checkpoint after epoch 6:
    # lr 3e-3, x0.7 every 5 epochs (StepLR), at each epoch's start.
    settings["schedule"] = ("resume_digits", [3e-3] * 5 + [2.1e-3] * 5 + [1.47e-3] * 2)
    return epoch_function_parts(loop, captured, loss_fn=loss_fn, expected_loss=ln10, **settings)


@pytest.fixture
def parts() -> Parts:
    return build()
