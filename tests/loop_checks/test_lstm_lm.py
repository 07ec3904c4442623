"""The training checks on reference_loops/lstm_lm.py (see loop_suite.py for how).

Its epoch function walks a (streams, length) tensor in ``bptt`` windows; a batch here is
one window as ``get_batch`` cuts it, handed back to the loop as a one-window source.
"""

from __future__ import annotations

import math

import pytest
import torch
from loop_suite import *  # noqa: F403  (the shared check tests)
from loop_suite import Parts, captured_main, epoch_function_parts

from trainwreck.checks import check_next_token_targets


def window_source(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The (streams, bptt + 1) source ``get_batch`` cuts ``batch`` from."""
    x, y = batch
    return torch.cat([x, y[:, -1:]], dim=1)


def build() -> Parts:
    loop, captured = captured_main("lstm_lm")
    model, source = captured["model"], captured["source"]
    windows = [loop.get_batch(source, i, loop.BPTT) for i in range(0, 22 * loop.BPTT, loop.BPTT)]

    def forward(m: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return m(x, m.init_hidden(x.size(0), x.device))[0]

    def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return captured["criterion"](logits.reshape(-1, logits.size(-1)), y.reshape(-1))

    return epoch_function_parts(
        loop,
        captured,
        loss_fn=loss_fn,
        expected_loss=math.log(model.head.out_features),
        data_arg="source",
        to_data=window_source,
        forward=forward,
        label_check=check_next_token_targets,
        batch=windows[0],
        batches=windows[1:],
        labels=windows[0],
        held_out=windows[-1],
        min_drop=0.12,  # about half the correct loop's drop
        overfit_steps=100,
    )


@pytest.fixture
def parts() -> Parts:
    return build()
