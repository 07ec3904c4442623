"""The training checks on reference_loops/cnn_digits.py (see loop_suite.py for how)."""

from __future__ import annotations

import math

import pytest
from loop_suite import *  # noqa: F403  (the shared check tests)
from loop_suite import Parts, capture_call, epoch_function_parts, load_loop


def build() -> Parts:
    loop = load_loop("cnn_digits")
    captured = capture_call(loop, "train_one_epoch", lambda: loop.main(["--seed", "0"]))
    return epoch_function_parts(
        loop,
        captured,
        loss_fn=captured["criterion"],
        expected_loss=math.log(10),
        n_batches=21,
        min_drop=0.3,  # about half the correct loop's drop
        overfit_steps=40,
    )


@pytest.fixture
def parts() -> Parts:
    return build()
