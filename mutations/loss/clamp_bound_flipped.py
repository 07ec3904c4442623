"""The ``clamp_bound_flipped`` operator (ClampBoundFlipped)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._loss_flow import loss_code
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import TRAINING_CONTEXTS, callee_name, method_name

_FLIP = {"min": "max", "max": "min"}
_FLIP_METHOD = {"clamp_min": "clamp_max", "clamp_max": "clamp_min"}


class ClampBoundFlipped(Swap):
    """Clamp from the other side: ``x.clamp(max=g)`` <-> ``x.clamp(min=g)`` (and
    ``clamp_min`` <-> ``clamp_max``) where one bound is given, in loss code.

    Bug: the lower and upper bound of a one-sided clamp are confused, a min/max slip.
    Real fix: lucidrains/denoising-diffusion-pytorch@ecd4582 (the min-SNR loss weight
    clamped the SNR from below, ``snr.clamp(min=gamma) / snr``, instead of capping it at
    gamma). Impact: the clamp now acts on the values it was meant to leave alone: a loss
    weight meant to cap the easy timesteps at 1 up-weights them instead, a floor against
    ``log(0)`` becomes a ceiling that flattens every value to the bound; training degrades
    or the loss goes flat while running without error. Clamps with both bounds are no
    sites. Fix: clamp with the bound the formula needs (write the formula in a comment
    and check it on two values). Check: print the clamped tensor's range against the
    intended one, or unit-test the weight on an easy and a hard example.
    """

    name = "clamp_bound_flipped"
    category = "loss"
    summary = "A one-sided clamp in loss code flipped: clamp(max=g) <-> clamp(min=g)."
    expected = "degrades"
    witness = "more clamp_above|clamp_below", "the clamp cuts the side the original left alone"
    node_types = (cst.Call,)
    contexts = TRAINING_CONTEXTS
    examples = (
        Example(
            before="""
                def p_losses(self, x, t):
                    snr = log_snr.exp()
                    loss_weight = snr.clamp(max=self.min_snr_gamma) / snr
                    return (losses * loss_weight).mean()
            """,
            after="""
                def p_losses(self, x, t):
                    snr = log_snr.exp()
                    loss_weight = snr.clamp(min=self.min_snr_gamma) / snr
                    return (losses * loss_weight).mean()
            """,
        ),
        Example(
            before="""
                def compute_loss(ratio, adv):
                    return -(torch.clamp(ratio, min=0.2) * adv).mean()
            """,
            after="""
                def compute_loss(ratio, adv):
                    return -(torch.clamp(ratio, max=0.2) * adv).mean()
            """,
        ),
    )
    non_examples = (
        # Both bounds: nothing one-sided to flip.
        """
            def compute_loss(ratio, adv):
                return -(torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
        """,
        # Not loss code: preprocessing.
        "image = image.clamp(min=0)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Call)
        statement = ctx.statement_of(node)
        method = method_name(node)
        if method in _FLIP_METHOD:
            if statement is None or not loss_code(statement, ctx):
                return None
            func = node.func.with_changes(attr=cst.Name(_FLIP_METHOD[method]))  # type: ignore[attr-defined]
            return node.with_changes(func=func)
        if callee_name(node) != "clamp" or any(arg.star for arg in node.args):
            return None
        bounds = [
            arg for arg in node.args if arg.keyword is not None and arg.keyword.value in _FLIP
        ]
        positional = [arg for arg in node.args if arg.keyword is None]
        # ``x.clamp(max=g)``: the tensor is the receiver; ``torch.clamp(x, min=g)``: the first.
        allowed = 0 if method == "clamp" and not _is_torch(node) else 1
        if len(bounds) != 1 or len(positional) != allowed:
            return None
        if statement is None or not loss_code(statement, ctx):
            return None
        bound = bounds[0]
        flipped = bound.with_changes(keyword=cst.Name(_FLIP[bound.keyword.value]))  # type: ignore[union-attr]
        return node.with_changes(args=[flipped if arg is bound else arg for arg in node.args])


def _is_torch(call: cst.Call) -> bool:
    func = call.func
    return (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "torch"
    )
