"""The ``clip_norm_scaled`` operator (ClipNormScaled)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import CLIP_FUNCTIONS
from mutator.context import Context
from mutator.operator import Example, Param, Replacement, Swap
from mutator.semantics import (
    as_factor,
    callee_name,
    find_arg,
    number_literal,
    number_value,
    with_arg_value,
)

# The threshold argument of each clipping function: (keyword, position).
_THRESHOLD = {"clip_grad_value_": ("clip_value", 1)}
_NORM = ("max_norm", 1)


def _times(expr: cst.BaseExpression, factor: float) -> cst.BaseExpression:
    """``expr`` times ``factor``: a computed literal for a literal, else ``expr * factor``."""
    value = number_value(expr)
    if value is not None:
        return number_literal(value * factor, integer=False)
    return cst.BinaryOperation(as_factor(expr), cst.Multiply(), number_literal(factor))


class ClipNormScaled(Swap):
    """Multiply the clipping threshold (``max_norm`` / ``clip_value``) by ``factor``.

    Bug: the clipping threshold is off by orders of magnitude (a norm meant for a summed loss
    used with a mean loss, a config unit mixed up, ``0.01`` typed for ``1.0``). Impact: with
    ``factor=0.01`` (default) nearly every step is clipped to a tiny norm: the direction
    survives, but under SGD (word_lm's hand-written update) the step shrinks by up to 100x
    and training crawls; Adam/AdamW normalise the scale away, so there it only evens out
    the steps (lstm_lm: no visible change in 2 epochs). With ``factor=100`` clipping never
    fires and spikes pass as if it were removed.
    Fix: choose the threshold from the logged gradient norms (a bit above their typical
    value). Check: log the norm ``clip_grad_norm_`` returns: clipped on ~every step (too
    low) or never, even on spikes (too high).
    """

    name = "clip_norm_scaled"
    category = "gradient"
    summary = "Scale the gradient-clipping threshold by a factor (x0.01 by default, or x100)."
    expected = "degrades"
    witness = "differs clip_active|clip_cut_at", "the clipping cuts the gradient on other steps"
    node_types = (cst.Call,)
    parameters = {
        "factor": Param(0.01, "multiplier applied to max_norm / clip_value", valid="(0, inf)")
    }
    variants = ({"factor": 100.0},)
    examples = (
        Example(
            before="torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)\n",
            after="torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.01)\n",
        ),
        Example(
            before="nn.utils.clip_grad_norm_(model.parameters(), args.clip)\n",
            after="nn.utils.clip_grad_norm_(model.parameters(), args.clip * 0.01)\n",
        ),
        Example(
            before="norm = clip_grad_norm_(params, 0.5)\n",
            after="norm = clip_grad_norm_(params, 50.0)\n",
            params={"factor": 100.0},
        ),
        Example(
            before="clip_grad_value_(model.parameters(), clip_value=5)\n",
            after="clip_grad_value_(model.parameters(), clip_value=0.05)\n",
        ),
    )
    non_examples = (
        "torch.clamp(x, -1.0, 1.0)\n",
        # No threshold written: nothing to scale.
        "clip_grad_norm_(model.parameters(), **clip_kwargs)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Call)
        function = callee_name(node)
        if function not in CLIP_FUNCTIONS:
            return None
        keyword, position = _THRESHOLD.get(function, _NORM)
        threshold = find_arg(node, keyword, position)
        if threshold is None or threshold.star:
            return None
        return with_arg_value(node, threshold, _times(threshold.value, self.params["factor"]))
