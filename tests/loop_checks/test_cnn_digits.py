"""The training checks on reference_loops/cnn_digits.py (see loop_suite.py for how)."""

from __future__ import annotations

import math

import pytest
from loop_suite import *  # noqa: F403  (the shared check tests)
from loop_suite import Parts, captured_main, epoch_function_parts


def build() -> Parts:
    loop, captured = captured_main("cnn_digits")
    loss_fn, ln10 = captured["criterion"], math.log(10)
    # min_drop: about half the correct loop's drop over the same steps.
    settings = dict(n_batches=21, min_drop=0.3, overfit_steps=40)
    # The correct schedule: lr 0.02 halved every 4 epochs (StepLR), at each epoch's start.
    settings["schedule"] = ("cnn_digits", [0.02] * 4 + [0.01] * 4 + [0.005])
    return epoch_function_parts(loop, captured, loss_fn=loss_fn, expected_loss=ln10, **settings)


@pytest.fixture
def parts() -> Parts:
    return build()
