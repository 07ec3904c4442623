"""The ``skip_val_normalization`` operator (SkipValNormalization)."""

from __future__ import annotations

import libcst as cst

from mutations.data._shared import drop_normalizations, normalization_group
from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    split_role,
    split_role_of,
)


def _normalization_role(node: cst.BinaryOperation, ctx: Context) -> str | None:
    """From the data, its target, else the function: ``def evaluate(x): (x - mu) / sd``."""
    role = split_role_of(node, ctx)
    if role is None:
        function = ctx.enclosing_function(node)
        role = split_role(function.name.value) if function is not None else None
    return role


class SkipValNormalization(Operator):
    """Normalize the training inputs but not the validation/test inputs.

    Bug: the validation (or test) split skips the standardization the training split
    gets: a forgotten line or a separate evaluation path (train/serving skew). Impact:
    training looks perfectly healthy, yet the model is evaluated on inputs of another
    scale and distribution: validation loss is high and accuracy low or erratic while
    the training loss keeps falling. Fix: build one preprocessing function and apply
    it to every split with the training statistics. Check: compare train and
    validation curves (a large gap from the first epoch), and print input statistics
    of a training and a validation batch side by side.
    """

    name = "skip_val_normalization"
    category = "data"
    summary = "Leave validation inputs unnormalized while training inputs are normalized."
    expected = "degrades"
    node_types = (cst.BinaryOperation,)
    examples = (
        Example(
            before="""
                X_train = (X_train - mean) / std
                X_val = (X_val - mean) / std
                val_ds = TensorDataset(X_val, y_val)
            """,
            after="""
                X_train = (X_train - mean) / std
                val_ds = TensorDataset(X_val, y_val)
            """,
        ),
        Example(
            before="""
                def train_step(x):
                    return model((x - mu) / sigma)
                def evaluate(x):
                    return model((x - mu) / sigma)
            """,
            after="""
                def train_step(x):
                    return model((x - mu) / sigma)
                def evaluate(x):
                    return model(x)
            """,
        ),
    )
    non_examples = (
        "X_train = (X_train - mean) / std\n",
        "X_val = (X_val - mean) / std\n",  # nothing normalized for training: not this bug
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        group = normalization_group(node, ctx)
        if not group or _normalization_role(node, ctx) != "eval":
            return None
        if not any(_normalization_role(m, ctx) != "eval" for m in group):
            return None
        return drop_normalizations([node], ctx)
