"""The ``mix_batch_dims`` operator (MixBatchDims)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    as_receiver,
    code_of,
    is_pure,
    method_name,
    number_value,
    parse_expr,
    resolve,
)


def _is_minus_one(expr: cst.BaseExpression) -> bool:
    return number_value(expr) == -1


def _is_batch_size(expr: cst.BaseExpression) -> bool:
    """``t.size(0)``, ``t.shape[0]``, ``len(t)`` or a name such as ``B`` / ``batch_size``."""
    if isinstance(expr, cst.Call):
        if method_name(expr) == "size" and len(expr.args) == 1:
            return number_value(expr.args[0].value) == 0
        return isinstance(expr.func, cst.Name) and expr.func.value == "len"
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute):
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        return (
            expr.value.attr.value == "shape"
            and isinstance(index, cst.Index)
            and number_value(index.value) == 0
        )
    return isinstance(expr, cst.Name) and expr.value in {"B", "N", "bs", "batch_size", "n_batch"}


def _is_last_dim(expr: cst.BaseExpression) -> bool:
    """``t.size(-1)`` or ``t.shape[-1]``: the feature/class dimension kept by a merge."""
    if isinstance(expr, cst.Call) and method_name(expr) == "size" and len(expr.args) == 1:
        return number_value(expr.args[0].value) == -1
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute):
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        return (
            expr.value.attr.value == "shape"
            and isinstance(index, cst.Index)
            and number_value(index.value) == -1
        )
    return False


def _is_time_merge(expr: cst.BaseExpression) -> bool:
    """``B * T``: batch and time merged into one dimension (nanoGPT's ``view(B * T, C)``)."""
    return (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Multiply)
        and isinstance(expr.left, cst.Name)
        and isinstance(expr.right, cst.Name)
    )


def _is_constant_size(expr: cst.BaseExpression) -> bool:
    """``784``, ``28 * 28``, ``32 * 2 * 2``: a per-sample feature count."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return _is_constant_size(expr.left) and _is_constant_size(expr.right)
    return isinstance(expr, cst.Integer) and int(expr.value) >= 2


class MixBatchDims(Swap):
    """Flatten with the batch dimension in the wrong place, mixing samples within a batch.

    Bug: a tensor laid out (C, B, ...) or (T, B, ...) is flattened as if it were
    (B, ...): a missing ``permute``, a ``batch_first`` mix-up, or ``view`` used where
    ``transpose`` was meant. It runs, since only the element count must fit, but row
    ``i`` now holds pieces of several samples. Impact: inputs no longer belong to
    their labels; the model learns little beyond class frequencies. Fix: flatten
    with the batch dimension first (``x.flatten(1)``) and assert shapes. Check: feed
    a batch whose samples differ (e.g. one zeroed) and verify that only that sample's
    output changes; overfit one batch.
    """

    name = "mix_batch_dims"
    category = "data"
    summary = "Flatten a batch with the batch dimension moved: samples mix within a batch."
    expected = "breaks_training"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="x = x.view(x.size(0), -1)\n",
            after="x = x.movedim(0, -1).reshape(x.size(0), -1)\n",
        ),
        Example(
            before="loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))\n",
            after=(
                "loss = F.cross_entropy(logits.transpose(0, 1).reshape(-1, logits.size(-1)), "
                "targets.view(-1))\n"
            ),
        ),
        Example(
            before="""
                import torch
                h = torch.flatten(h, 1)
                out = self.fc(h)
            """,
            after="""
                import torch
                h = h.movedim(0, -1).reshape(h.size(0), -1)
                out = self.fc(h)
            """,
        ),
        Example(
            before="x = x.reshape(-1, 28 * 28)\n",
            after="x = x.movedim(0, -1).reshape(-1, 28 * 28)\n",
        ),
    )
    non_examples = (
        "y = targets.view(-1)\n",
        "w = w.view(out_features, in_features)\n",
        "x = x.view(B, T, n_head, C // n_head)\n",
        "y = y.view(-1, 1)\n",  # a 1-D column: the rewrite would change nothing
        """
            import torch
            h = torch.flatten(self.pool(h), 1)
        """,
    )

    def _layout(self, node: cst.CSTNode, ctx: Context) -> str | None:
        """ "sample" for a per-sample flatten, "time" for merging (B, T) and None otherwise."""
        if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
            return None
        method = node.func.attr.value
        args = [arg.value for arg in node.args]
        if any(arg.keyword is not None or arg.star for arg in node.args):
            return None
        if method in ("view", "reshape") and len(args) == 2:
            first, second = args
            if _is_batch_size(first) and _is_minus_one(second):
                return "sample"
            if _is_minus_one(first) and _is_constant_size(second):
                return "sample"
            if (_is_minus_one(first) and _is_last_dim(second)) or _is_time_merge(first):
                return "time"
            return None
        # ``flatten`` has no batch size to reuse: the rewrite repeats the tensor.
        if method == "flatten" and len(args) == 1 and number_value(args[0]) == 1:
            return "sample" if is_pure(node.func.value) else None
        if (
            len(args) == 2
            and number_value(args[1]) == 1
            and is_pure(args[0])
            and resolve(node, ctx, strict=False).matches(("torch.flatten",))
        ):
            return "sample"
        return None

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        layout = self._layout(node, ctx)
        if layout is None:
            return None
        if method_name(node) == "flatten" or not isinstance(node.func, cst.Attribute):
            tensor = code_of(node.args[0].value if len(node.args) == 2 else node.func.value)
            return parse_expr(f"{tensor}.movedim(0, -1).reshape({tensor}.size(0), -1)")
        receiver = node.func.value
        # Moving batch to the end interleaves all samples, even when C == 1; a (T, B)
        # mix-up swaps the two leading dims, so targets pair with other tokens.
        moved = "transpose(0, 1)" if layout == "time" else "movedim(0, -1)"
        shifted = parse_expr(f"{code_of(as_receiver(receiver))}.{moved}")
        return node.with_changes(
            func=node.func.with_changes(value=shifted, attr=cst.Name("reshape"))
        )
