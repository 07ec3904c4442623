"""The ``dropout_too_high`` operator (DropoutTooHigh)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Param, Replacement, Swap
from mutator.semantics import (
    find_arg,
    hyperparameter_constants,
    nn_class,
    number_literal,
    number_value,
    resolve,
    with_arg_value,
    with_keyword,
)
from mutator.semantics.config import config_setting, with_setting_value

_DROPOUT_CLASSES = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout")


_DROPOUT_FUNCTIONS = {
    f"torch.nn.functional.{name}"
    for name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout")
}


class DropoutTooHigh(Swap):
    """Set the dropout probability far too high (``p=0.9`` by default).

    Bug: a dropout rate meant as a keep probability (Keras/TF1 ``keep_prob=0.9``) or a
    typo makes ``nn.Dropout`` drop most activations. Impact: training sees a network
    with a tenth of its units and noisy, rescaled activations: the training loss stays
    high and noisy, convergence slows, and validation (dropout off) lags the reference;
    small models underfit badly. Fix: use a small rate (0.1-0.5) and remember ``p`` is
    the probability of *dropping*. Check: compare train/val curves with the reference
    (training loss far above validation loss is the tell).
    """

    name = "dropout_too_high"
    category = "numerics"
    summary = "Dropout probability set to 0.9: most activations dropped in training."
    expected = "degrades"
    witness = "differs dropout_p", "dropout drops with another probability"
    node_types = (cst.Call, cst.Assign, cst.AnnAssign, cst.DictElement)
    parameters = {"p": Param(0.9, "dropout probability", valid="[0, 1]")}
    examples = (
        Example(
            before="""
                dropout = 0.0
                model = GPT(dropout=dropout)
            """,
            after="""
                dropout = 0.9
                model = GPT(dropout=dropout)
            """,
        ),
        Example(
            before="""
                from torch import nn
                self.dropout = nn.Dropout(0.2)
            """,
            after="""
                from torch import nn
                self.dropout = nn.Dropout(0.9)
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                x = F.dropout(x, p=0.1, training=self.training)
            """,
            after="""
                import torch.nn.functional as F
                x = F.dropout(x, p=0.9, training=self.training)
            """,
        ),
        Example(
            before="""
                from torch import nn
                layer = nn.Dropout()
            """,
            after="""
                from torch import nn
                layer = nn.Dropout(0.95)
            """,
            params={"p": 0.95},
        ),
        # A model config dict read by a model class imported from elsewhere (issue 22).
        Example(
            before="""
                GPT_CONFIG_124M = {"vocab_size": 50257, "drop_rate": 0.1}
                model = GPTModel(GPT_CONFIG_124M)
            """,
            after="""
                GPT_CONFIG_124M = {"vocab_size": 50257, "drop_rate": 0.9}
                model = GPTModel(GPT_CONFIG_124M)
            """,
        ),
    )
    non_examples = (
        """
            from torch import nn
            layer = nn.Dropout(0.9)
        """,
        """
            from torch import nn
            layer = nn.Linear(4, 2)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        setting = config_setting(node, ctx, "dropout")
        if setting is not None:
            # ``"drop_rate": 0.1`` in a model config read by a model built elsewhere
            # (issue 22), when this script builds no dropout layer itself.
            value = number_value(setting.value)
            if (
                value is None
                or value >= self.params["p"]
                or any(_is_dropout(call, ctx) for call in ctx.nodes(cst.Call))
            ):
                return None  # the script builds its dropout layers: those are the sites
            return with_setting_value(setting, number_literal(float(self.params["p"])))
        if isinstance(node, cst.Assign):
            # ``dropout = 0.0`` at module level: every layer built from it changes at once.
            constant = any(node is c for c in hyperparameter_constants(ctx, "dropout"))
            value = number_value(node.value)
            if constant and value is not None and value < self.params["p"]:
                return node.with_changes(value=number_literal(float(self.params["p"])))
            return None
        if not _is_dropout(node, ctx):
            return None
        arg = _probability_arg(node, ctx)  # type: ignore[arg-type]
        current = 0.5 if arg is None else number_value(arg.value)  # 0.5: PyTorch's default
        if not (current is None or current < self.params["p"]):
            return None
        assert isinstance(node, cst.Call)
        arg = _probability_arg(node, ctx)
        value = number_literal(float(self.params["p"]))
        if arg is not None:
            return with_arg_value(node, arg, value)
        if not node.args:
            return node.with_changes(args=[cst.Arg(value)])
        return with_keyword(node, "p", value)


def _is_dropout(node: cst.CSTNode, ctx: Context) -> bool:
    """``nn.Dropout(...)`` (and its 1d/2d/3d/alpha kin) or ``F.dropout(x, ...)``."""
    if not isinstance(node, cst.Call):
        return False
    if nn_class(node, ctx, _DROPOUT_CLASSES):
        return True
    return bool(node.args) and resolve(node.func, ctx).matches(_DROPOUT_FUNCTIONS)


def _probability_arg(node: cst.Call, ctx: Context) -> cst.Arg | None:
    """The argument holding p (first for the module, after the tensor for the function)."""
    position = 0 if nn_class(node, ctx, _DROPOUT_CLASSES) else 1
    return find_arg(node, keyword="p", position=position)
