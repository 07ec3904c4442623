"""The ``view_instead_of_permute`` operator (ViewInsteadOfPermute)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    code_of,
    method_name,
    number_value,
    parse_expr,
    receiver,
)


def _permutation(call: cst.Call) -> list[int] | None:
    """The dims of ``x.permute(0, 3, 1, 2)`` (or ``permute((0, 3, 1, 2))``) when they move
    some axis; else None."""
    args = [arg.value for arg in call.args]
    if len(args) == 1 and isinstance(args[0], (cst.Tuple, cst.List)):
        args = [element.value for element in args[0].elements]
    dims = [number_value(arg) for arg in args]
    if len(dims) < 2 or any(d is None or d < 0 or d != int(d) for d in dims):
        return None
    order = [int(d) for d in dims]  # type: ignore[arg-type]
    if sorted(order) != list(range(len(order))) or order == sorted(order):
        return None
    return order


class ViewInsteadOfPermute(Swap):
    """Replace ``x.permute(...)`` by ``x.view(...)`` to the same target shape.

    Bug: a layout change written as a reshape: ``images.view(N, C, H, W)`` on channels-last
    ``(N, H, W, C)`` data (numpy/PIL images, TFRecords), where ``permute(0, 3, 1, 2)`` was
    meant. The shape is right, so nothing fails. Impact: the values are not moved to their
    channel, only re-cut: every "channel" holds a scrambled strip of pixels of all colours,
    and spatial neighbours in the tensor are no longer neighbours in the image. The
    scrambling is the same for every image, so a network still learns, but without the
    locality its convolutions assume: the loss falls slower and accuracy stays below the
    reference (channels_last_cifar, 2 epochs: 0.77 against 0.85). Fix: ``permute`` (or ``movedim``) to reorder axes,
    ``view``/``reshape`` only to split or merge adjacent ones. Check: plot one input channel
    after the conversion, or compare ``x[0, :, i, j]`` with the original pixel ``(i, j)``.
    """

    name = "view_instead_of_permute"
    category = "data"
    summary = "x.permute(0, 3, 1, 2) written as a view to the same shape: pixels scrambled."
    expected = "degrades"
    witness = "differs train_inputs|eval_inputs|losses|eval_outputs", "pixels re-cut, same shape"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="images = images.permute(0, 3, 1, 2).float() / 255\n",
            after=(
                "images = images.view(images.shape[0], images.shape[3], images.shape[1],"
                " images.shape[2]).float() / 255\n"
            ),
        ),
        Example(
            before="img = torch.from_numpy(array).permute((2, 0, 1))\n",
            after=(
                "img = torch.from_numpy(array).reshape(torch.from_numpy(array).shape[2],"
                " torch.from_numpy(array).shape[0], torch.from_numpy(array).shape[1])\n"
            ),
        ),
    )
    non_examples = (
        "x = x.view(x.size(0), -1)\n",
        # Identity permutation: nothing moves.
        "x = x.permute(0, 1, 2)\n",
        "k = k.transpose(1, 2)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Call)
        if method_name(node) != "permute" or not isinstance(node.func, cst.Attribute):
            return None
        order = _permutation(node)
        if order is None:
            return None
        source = receiver(node)
        text = code_of(source)
        # The bug's usual spelling is view on a named batch; a call receiver is repeated for
        # its shape, and reshape keeps that mutant running whatever the result's strides.
        method = "view" if isinstance(source, (cst.Name, cst.Attribute)) else "reshape"
        shape = ", ".join(f"{text}.shape[{dim}]" for dim in order)
        return parse_expr(f"{text}.{method}({shape})").with_changes(lpar=node.lpar, rpar=node.rpar)
