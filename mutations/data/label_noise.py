"""The ``label_noise`` operator (LabelNoise)."""

from __future__ import annotations

import libcst as cst

from mutations.data._shared import rewritable_labels
from mutator.context import Context
from mutator.operator import Example, Param, Replacement, Swap
from mutator.semantics import (
    callee_name,
    code_of,
    has_class_index_loss,
    module_alias,
    parse_expr,
    unpacked_values,
    with_arg_value,
)
from mutator.semantics.cache import per_node

_INT_HINTS = ("torch.long", "torch.int", ".long()", "LongTensor", "randint", "argmax", "int64")


_FLOAT_HINTS = ("torch.float", ".float()", "float32", "float64", "FloatTensor", "torch.double")


@per_node  # every site of a long file walks the same definitions: render each once
def _code(expr: cst.BaseExpression, ctx: Context) -> str:
    return code_of(expr)


def _dtype_sources(expr: cst.BaseExpression, ctx: Context) -> list[str]:
    """Names whose values may carry their dtype into ``expr``; a length (``len(x)``, a
    permutation's size) carries none: the inputs' float dtype is not the labels'."""
    found = []
    for name in ctx.nodes_within(expr, cst.Name):
        parent = ctx.parent(name)
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            continue
        arg = parent if isinstance(parent, cst.Arg) else None
        call = ctx.parent(arg) if arg is not None else None
        if isinstance(call, cst.Call) and callee_name(call) in ("len", "randperm", "arange"):
            continue
        found.append(name.value)  # type: ignore[attr-defined]
    return found


def _label_kind(labels: cst.BaseExpression, ctx: Context) -> str | None:
    """ "int" or "float" from the dtype evidence nearest to ``labels`` along its definitions."""
    level, seen = [labels], set()
    for _ in range(4):
        texts = [_code(expr, ctx) for expr in level]
        if any(hint in text for text in texts for hint in _FLOAT_HINTS):
            return "float"
        if any(hint in text for text in texts for hint in _INT_HINTS):
            return "int"
        following = []
        for expr in level:
            for name in _dtype_sources(expr, ctx):
                if name not in seen:
                    seen.add(name)
                    following.extend(unpacked_values(ctx, name))
        level = following
    # No dtype on the way: a classification loss says the labels are class indices.
    return "int" if has_class_index_loss(ctx) else None


class LabelNoise(Swap):
    """Replace a fraction ``p`` of the training labels by random classes.

    Bug: a fraction of the class labels is wrong (annotation noise, a buggy label
    mapping or augmentation that changes the class). Impact: the model fits the noise
    late in training; training loss plateaus well above zero, validation accuracy
    drops and the train/val gap widens with more epochs (Zhang et al. 2017 show
    networks memorize random labels). Fix: audit the label pipeline; use label
    cleaning or a noise-robust loss when noise is inherent. Check: inspect the
    highest-loss training samples, and compare train/val curves (train accuracy
    stalls near 1 - p).
    """

    name = "label_noise"
    category = "data"
    summary = "Replace a fraction p of the training labels by random classes."
    expected = "degrades"
    witness = "differs targets", "the targets reaching the training loss differ"
    node_types = (cst.Call,)
    parameters = {
        "p": Param(0.3, "fraction of training labels replaced by a random class", valid="(0, 1]")
    }
    variants = ({"p": 0.8},)
    examples = (
        Example(
            before="""
                import torch
                y = torch.tensor(target, dtype=torch.long)
                train_ds = TensorDataset(X, y)
            """,
            after="""
                import torch
                y = torch.tensor(target, dtype=torch.long)
                train_ds = TensorDataset(X, torch.where(torch.rand(y.shape) < 0.3, torch.randint_like(y, int(y.max()) + 1), y))
            """,
        ),
        Example(
            before="""
                import torch as T
                loss_fn = T.nn.CrossEntropyLoss()
                ds = TensorDataset(X, labels)
            """,
            after="""
                import torch as T
                loss_fn = T.nn.CrossEntropyLoss()
                ds = TensorDataset(X, T.where(T.rand(labels.shape) < 0.1, T.randint_like(labels, int(labels.max()) + 1), labels))
            """,
            params={"p": 0.1},
        ),
        # The inputs' float dtype reaches the labels only through ``len(x)``: no dtype of
        # theirs; the classification loss says they are class indices (issue 29).
        Example(
            before="""
                import torch
                import torch.nn as nn
                criterion = nn.CrossEntropyLoss()
                x = torch.tensor(data, dtype=torch.float32)
                order = torch.randperm(len(x))
                y = targets[order]
                train_set = TensorDataset(x[order][:100], y[:100])
            """,
            after="""
                import torch
                import torch.nn as nn
                criterion = nn.CrossEntropyLoss()
                x = torch.tensor(data, dtype=torch.float32)
                order = torch.randperm(len(x))
                y = targets[order]
                train_set = TensorDataset(x[order][:100], torch.where(torch.rand(y[:100].shape) < 0.3, torch.randint_like(y[:100], int(y.max()) + 1), y[:100]))
            """,
        ),
    )
    non_examples = (
        # Regression targets are not classes.
        """
            import torch
            y = torch.tensor(target, dtype=torch.float32)
            ds = TensorDataset(X, y)
        """,
        """
            import torch
            val_ds = TensorDataset(X_val, y_val)
            loss = F.cross_entropy(a, b)
        """,
        # Nothing says the labels are classes.
        """
            import torch
            ds = TensorDataset(X, y)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        labels = rewritable_labels(node, ctx)
        if labels is None or _label_kind(labels.value, ctx) != "int":
            return None
        torch = module_alias(ctx, "torch")
        y = code_of(labels.value)
        base = labels.value.value if isinstance(labels.value, cst.Subscript) else labels.value
        num_classes = f"int({code_of(base)}.max()) + 1"
        noisy = parse_expr(
            f"{torch}.where({torch}.rand({y}.shape) < {self.params['p']!r}, "
            f"{torch}.randint_like({y}, {num_classes}), {y})"
        )
        return with_arg_value(node, labels, noisy)
