"""The ``interpolation_weight_per_element`` operator (InterpolationWeightPerElement)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    code_of,
    keyword_arg,
    number_value,
    parse_expr,
    resolve,
    single_assignment,
)

# Random draws whose shape is one argument: name -> its position (or keyword ``size``).
_NUMPY_DRAWS = {
    "numpy.random.random": 0,
    "numpy.random.random_sample": 0,
    "numpy.random.uniform": 2,
}
_NUMPY_DRAWS |= {"numpy.random.beta": 2}
_TORCH_DRAWS = ("torch.rand", "torch.randn")


def _batch_column(dims: list[cst.BaseExpression]) -> str | None:
    """``x`` of ``(x.size(0), 1, 1, 1)`` / ``(x.shape[0], 1)``: one weight per sample."""
    if len(dims) < 2 or any(number_value(d) != 1 for d in dims[1:]):
        return None
    first = dims[0]
    if (  # ``x.size(0)``
        isinstance(first, cst.Call)
        and isinstance(first.func, cst.Attribute)
        and first.func.attr.value == "size"
        and len(first.args) == 1
        and number_value(first.args[0].value) == 0
    ):
        return code_of(first.func.value)
    if isinstance(first, cst.Subscript) and isinstance(
        first.value, cst.Attribute
    ):  # ``x.shape[0]``
        index = first.slice[0].slice if len(first.slice) == 1 else None
        zero = isinstance(index, cst.Index) and number_value(index.value) == 0
        if first.value.attr.value == "shape" and zero:
            return code_of(first.value.value)
    return None


def _interpolates(name: str, statement: cst.CSTNode, ctx: Context) -> bool:
    """Is ``name`` used as ``w * a + (1 - w) * b`` in the function of ``statement``: is
    there a ``1 - w`` there?"""
    scope = ctx.enclosing_function(statement) or ctx.module
    for node in ctx.nodes_within(scope, cst.BinaryOperation):
        if (
            isinstance(node.operator, cst.Subtract)  # type: ignore[attr-defined]
            and number_value(node.left) == 1  # type: ignore[attr-defined]
            and isinstance(node.right, cst.Name)  # type: ignore[attr-defined]
            and node.right.value == name  # type: ignore[attr-defined]
        ):
            return True
    return False


class InterpolationWeightPerElement(Swap):
    """Draw the interpolation weight per element instead of per sample:
    ``random((x.size(0), 1, 1, 1))`` -> ``random(size=x.shape)``.

    Bug: the random weight of an interpolation between two batches (the WGAN-GP penalty's
    points between real and fake samples, mixup) is drawn with the batch's full shape, one
    weight per pixel, instead of one per sample broadcast over the rest. Real fix:
    eriklindernoren/PyTorch-GAN@d2977bc (``np.random.random(size=real_samples.shape)`` in
    WGAN-GP). Impact: the mixed samples are no longer points on the line between a real
    and a fake image but per-pixel noise mixtures of the two: the gradient penalty
    constrains the critic where no data lies and the Lipschitz constraint it was meant to
    enforce goes loose (mixup's inputs no longer match its mixed labels); training runs and
    degrades. Only a draw whose result feeds ``w * a + (1 - w) * b`` in the same function
    is a site. Fix: draw ``(batch, 1, 1, 1)`` and let it broadcast. Check: assert the weight
    tensor's shape is ``(batch,) + (1,) * (x.dim() - 1)``.
    """

    name = "interpolation_weight_per_element"
    category = "loss"
    summary = "Interpolation weight drawn per element (x.shape), not per sample."
    expected = "degrades"
    witness = "differs train_inputs", "the critic sees points off the real-fake segment"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import numpy as np
                def compute_gradient_penalty(D, real_samples, fake_samples):
                    alpha = Tensor(np.random.random((real_samples.size(0), 1, 1, 1)))
                    interpolates = alpha * real_samples + ((1 - alpha) * fake_samples)
                    return D(interpolates)
            """,
            after="""
                import numpy as np
                def compute_gradient_penalty(D, real_samples, fake_samples):
                    alpha = Tensor(np.random.random(size=real_samples.shape))
                    interpolates = alpha * real_samples + ((1 - alpha) * fake_samples)
                    return D(interpolates)
            """,
        ),
        Example(
            before="""
                import torch
                def gradient_penalty(critic, real, fake):
                    eps = torch.rand(real.shape[0], 1, 1, 1, device=real.device)
                    mixed = eps * real + (1 - eps) * fake
                    return critic(mixed)
            """,
            after="""
                import torch
                def gradient_penalty(critic, real, fake):
                    eps = torch.rand(real.shape, device=real.device)
                    mixed = eps * real + (1 - eps) * fake
                    return critic(mixed)
            """,
        ),
    )
    non_examples = (
        # Noise for the generator: no interpolation reads it.
        """
            import torch
            z = torch.randn(imgs.shape[0], 1, 1, 1)
            fake = generator(z)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Call)
        names = resolve(node.func, ctx).names
        statement = ctx.statement_of(node)
        assign = single_assignment(statement) if statement is not None else None
        if assign is None or len(assign.targets) != 1:
            return None
        target = assign.targets[0].target
        if not isinstance(target, cst.Name) or not _interpolates(target.value, statement, ctx):
            return None
        numpy = next((name for name in names if name in _NUMPY_DRAWS), None)
        if numpy is not None:
            return _numpy_per_element(node, _NUMPY_DRAWS[numpy])
        if names & set(_TORCH_DRAWS):
            return _torch_per_element(node)
        return None


def _numpy_per_element(node: cst.Call, position: int) -> cst.Call | None:
    positional = [arg for arg in node.args if arg.keyword is None]
    shape = next((arg for arg in node.args if arg.keyword and arg.keyword.value == "size"), None)
    if shape is None and len(positional) > position:
        shape = positional[position]
    if shape is None or not isinstance(shape.value, cst.Tuple):
        return None
    source = _batch_column([element.value for element in shape.value.elements])
    if source is None:
        return None
    sized = keyword_arg("size", parse_expr(f"{source}.shape"))
    args = [arg for arg in node.args if arg is not shape]
    return node.with_changes(args=[*args, sized.with_changes(comma=cst.MaybeSentinel.DEFAULT)])


def _torch_per_element(node: cst.Call) -> cst.Call | None:
    dims = [arg for arg in node.args if arg.keyword is None]
    values = [arg.value for arg in dims]
    if len(values) == 1 and isinstance(values[0], cst.Tuple):
        values = [element.value for element in values[0].elements]
    source = _batch_column(values)
    if source is None:
        return None
    keywords = [arg for arg in node.args if arg.keyword is not None]
    shaped = cst.Arg(parse_expr(f"{source}.shape"))
    return node.with_changes(args=[shaped.with_changes(comma=dims[-1].comma), *keywords])
