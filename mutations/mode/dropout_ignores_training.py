"""The ``dropout_ignores_training`` operator (DropoutIgnoresTraining)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import find_arg, is_true, resolve, without_arg

# Functional dropouts whose ``training`` argument defaults to True.
FUNCTIONAL_DROPOUTS = frozenset(
    f"torch.nn.functional.{name}"
    for name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout")
)


class DropoutIgnoresTraining(Swap):
    """Remove ``training=self.training`` from a functional dropout call.

    Bug: ``F.dropout(x, p)`` is written without ``training=self.training``; unlike
    ``nn.Dropout``, the functional form does not follow ``model.eval()``: its ``training``
    argument defaults to True. Impact: training is unchanged, but every evaluation still
    drops activations: validation metrics are noisy and worse than the model is (more so
    for a large ``p``), so model selection and early stopping read the wrong numbers, and
    predictions are not deterministic. Fix: pass ``training=self.training`` or use an
    ``nn.Dropout`` module. Check: two evaluations of the same batch in eval mode must give
    identical outputs.
    """

    name = "dropout_ignores_training"
    category = "mode"
    summary = "F.dropout without training=self.training: dropout stays on in evaluation."
    expected = "misleads"
    witness = "more eval_mode_on", "an evaluation forward applies dropout"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import torch.nn.functional as F
                x = F.dropout(x, p=0.1, training=self.training)
            """,
            after="""
                import torch.nn.functional as F
                x = F.dropout(x, p=0.1)
            """,
        ),
        Example(
            before="""
                from torch.nn import functional
                h = functional.dropout2d(h, 0.25, self.training)
            """,
            after="""
                from torch.nn import functional
                h = functional.dropout2d(h, 0.25)
            """,
        ),
    )
    non_examples = (
        # Already always on (MC dropout): nothing to remove.
        """
            import torch.nn.functional as F
            x = F.dropout(x, p=0.5, training=True)
        """,
        """
            import torch.nn.functional as F
            x = F.dropout(x, p=0.5)
        """,
        """
            import torch.nn as nn
            self.drop = nn.Dropout(0.5)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Call)
        if not resolve(node.func, ctx, strict=False).matches(FUNCTIONAL_DROPOUTS):
            return None
        training = find_arg(node, "training", 2)
        if training is None or training.star or is_true(training.value):
            return None
        return without_arg(node, training)
