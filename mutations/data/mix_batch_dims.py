"""The ``mix_batch_dims`` operator (MixBatchDims)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    as_receiver,
    code_of,
    is_pure,
    method_name,
    number_value,
    parse_expr,
    resolve,
    values_of,
)


def _is_minus_one(expr: cst.BaseExpression) -> bool:
    return number_value(expr) == -1


def _is_batch_size(expr: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> bool:
    """``t.size(0)``, ``t.shape[0]``, ``len(t)``, a name such as ``B`` / ``batch_size``, or a
    name bound only to one of those (``in_size = x.size(0)``)."""
    if isinstance(expr, cst.Call):
        if method_name(expr) == "size" and len(expr.args) == 1:
            return number_value(expr.args[0].value) == 0
        return isinstance(expr.func, cst.Name) and expr.func.value == "len"
    if isinstance(expr, cst.Subscript):
        return _size_index(expr) == 0
    if isinstance(expr, cst.Name) and expr.value in {"B", "N", "bs", "batch_size", "n_batch"}:
        return True
    values = values_of(expr, ctx, at) if isinstance(expr, cst.Name) else []
    return bool(values) and all(_is_batch_size(v, ctx, v) for v in values if v is not expr)


def _size_index(expr: cst.BaseExpression) -> float | None:
    """``i`` of ``t.shape[i]`` or ``t.size(i)``, else None."""
    if isinstance(expr, cst.Call) and method_name(expr) == "size" and len(expr.args) == 1:
        return number_value(expr.args[0].value)
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute):
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        if expr.value.attr.value == "shape" and isinstance(index, cst.Index):
            return number_value(index.value)
    return None


def _is_last_dim(expr: cst.BaseExpression) -> bool:
    """``t.size(-1)`` or ``t.shape[-1]``: the feature/class dimension kept by a merge."""
    return _size_index(expr) == -1


def _is_time_merge(expr: cst.BaseExpression) -> bool:
    """``B * T`` or ``t.size(0) * t.size(1)``: batch and time merged into one dimension
    (nanoGPT's ``view(B * T, C)``, a tutorial LM's ``reshape(out.size(0) * out.size(1), H)``)."""
    if not isinstance(expr, cst.BinaryOperation) or not isinstance(expr.operator, cst.Multiply):
        return False
    if isinstance(expr.left, cst.Name) and isinstance(expr.right, cst.Name):
        return True
    return (_size_index(expr.left), _size_index(expr.right)) == (0, 1)


def _is_constant_size(expr: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> bool:
    """``784``, ``28 * 28``, ``32 * 2 * 2``, or a name bound only to such a constant
    (``image_size = 784``): a per-sample feature count."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return _is_constant_size(expr.left, ctx, at) and _is_constant_size(expr.right, ctx, at)
    if isinstance(expr, cst.Name):
        values = values_of(expr, ctx, at)
        return bool(values) and all(
            isinstance(v, (cst.Integer, cst.BinaryOperation)) and _is_constant_size(v, ctx, v)
            for v in values
        )
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
    output changes; overfit one batch. Not told apart: rows that are not data samples, such
    as the input gradients of a WGAN-GP penalty (the mutant mixes samples' gradient norms,
    not inputs with labels; 1 of 15 corpus mutants on the default path, issue 22).
    """

    name = "mix_batch_dims"
    category = "data"
    summary = "Flatten a batch with the batch dimension moved: samples mix within a batch."
    expected = "breaks_training"
    witness = "differs train_inputs|eval_inputs|losses|eval_outputs", "samples mix in a batch"
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
        # An LM's (B, T, V) logits flattened for the loss (issue 22: the engine took the
        # method for torch.flatten(input, start_dim) and raised on the whole file).
        Example(
            before="loss = F.cross_entropy(logits.flatten(0, 1), target_batch.flatten())\n",
            after=(
                "loss = F.cross_entropy(logits.transpose(0, 1).flatten(0, 1), "
                "target_batch.flatten())\n"
            ),
        ),
        Example(
            before="out = out.reshape(out.size(0) * out.size(1), out.size(2))\n",
            after="out = out.transpose(0, 1).reshape(out.size(0) * out.size(1), out.size(2))\n",
        ),
        Example(  # the batch size by a name that holds x.size(0)
            before="""
                in_size = x.size(0)
                x = x.view(in_size, -1)
            """,
            after="""
                in_size = x.size(0)
                x = x.movedim(0, -1).reshape(in_size, -1)
            """,
        ),
        Example(  # the per-sample size by a named constant
            before="""
                image_size = 784
                x = x.view(-1, image_size)
            """,
            after="""
                image_size = 784
                x = x.movedim(0, -1).reshape(-1, image_size)
            """,
        ),
    )
    non_examples = (
        # Per-sample input gradients of a gradient penalty: rows, but no data batch (issue 29).
        """
            import torch
            def gradient_penalty(D, x):
                gradients = torch.autograd.grad(D(x).sum(), x, create_graph=True)[0]
                gradients = gradients.view(gradients.size(0), -1)
                return ((gradients.norm(2, dim=1) - 1) ** 2).mean()
        """,
        "y = targets.view(-1)\n",
        "w = w.view(out_features, in_features)\n",
        "x = x.view(B, T, n_head, C // n_head)\n",
        "y = y.view(-1, 1)\n",  # a 1-D column: the rewrite would change nothing
        """
            import torch
            h = torch.flatten(self.pool(h), 1)
        """,
        "y = x.flatten(1, 2)\n",  # merges two feature dimensions: no sample mixes
        """
            image_size = img.size(2)
            x = x.view(-1, image_size)
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
            if _is_batch_size(first, ctx, node) and _is_minus_one(second):
                return "sample"
            if _is_minus_one(first) and _is_constant_size(second, ctx, node):
                return "sample"
            if (_is_minus_one(first) and _is_last_dim(second)) or _is_time_merge(first):
                return "time"
            return None
        # ``flatten`` has no batch size to reuse: the rewrite repeats the tensor.
        if method == "flatten" and len(args) == 1 and number_value(args[0]) == 1:
            return "sample" if is_pure(node.func.value) else None
        # ``x.flatten(0, 1)`` merges batch and time (an LM's logits); it is the method, not
        # ``torch.flatten(input, start_dim)``, whose last name it shares.
        if method == "flatten" and [number_value(a) for a in args] == [0, 1]:
            return "time" if is_pure(node.func.value) else None
        callee = resolve(node, ctx, strict=False)
        if (
            len(args) == 2
            and number_value(args[1]) == 1
            and is_pure(args[0])
            and callee.under("torch")
            and callee.matches(("torch.flatten",))
        ):
            return "sample"
        return None

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        layout = self._layout(node, ctx)
        if layout is None:
            return None
        reshaped = [node.func.value] if isinstance(node.func, cst.Attribute) else []
        reshaped += [node.args[0].value] if node.args else []
        if any(_input_gradients(tensor, ctx, node) for tensor in reshaped):
            return NonSite(
                "the rows are input gradients (torch.autograd.grad, a gradient penalty), not "
                "a data batch"
            )
        if method_name(node) == "flatten" and layout == "time":
            moved = parse_expr(f"{code_of(as_receiver(node.func.value))}.transpose(0, 1)")
            return node.with_changes(func=node.func.with_changes(value=moved))
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


def _input_gradients(tensor: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> bool:
    """Is ``tensor`` what ``torch.autograd.grad`` returned (issue 29: WGAN-GP's penalty
    reshapes each sample's input gradient into a row)?"""
    held = values_of(tensor, ctx, at) if isinstance(tensor, cst.Name) else [tensor]
    held = [value for value in held if not ctx.within(value, at)]  # the reshape's own line
    for value in held:
        while isinstance(value, cst.Subscript):
            value = value.value
        if not (
            isinstance(value, cst.Call)
            and resolve(value.func, ctx).matches(("torch.autograd.grad",))
        ):
            return False
    return bool(held)
