"""Torch knowledge trainwreck-lint needs that the shared semantics layer does not hold yet.

libcst and mutator only (no experiments imports), written once so that it can be folded
into the semantics package next to the loss and optimizer recognisers it builds on.
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.patterns import optimizer_class

# Losses that apply softmax / sigmoid themselves and so expect raw logits (loss class names
# as ``patterns.loss_call_kind`` returns them, for the class and the functional form).
LOGITS_LOSSES = frozenset({"CrossEntropyLoss", "BCEWithLogitsLoss"})
# Optimizers that normalise the step by a running second moment: their useful learning
# rates are ~1e-4..3e-3, a hundred times below SGD's, and a tiny ``eps`` makes them explode.
ADAPTIVE_OPTIMIZERS = frozenset({"Adam", "AdamW", "NAdam", "RAdam", "Adamax", "Adagrad", "RMSprop"})


def adaptive_optimizer(call: cst.CSTNode, ctx: Context) -> str | None:
    """``"Adam"`` for ``optim.Adam(...)`` (any alias) when it is adaptive, else None."""
    name = optimizer_class(call, ctx)
    return name if name in ADAPTIVE_OPTIMIZERS else None
