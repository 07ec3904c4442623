"""The ``float_class_targets`` operator (FloatClassTargets)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    CLASS_INDEX_LOSSES,
    TRAINING_CONTEXTS,
    find_arg,
    is_label_name,
    loss_call_kind,
    loss_target,
    method_name,
    resolve,
    starts_before,
    uses_loss,
    with_arg_value,
)


class FloatClassTargets(Swap):
    """Make the class-index targets of cross-entropy/NLL floating point.

    Bug: the label tensor is built with ``dtype=torch.float32`` instead of ``torch.long``
    (or ``.long()`` becomes ``.float()``), a habit carried over from regression or BCE
    code. Impact: ``CrossEntropyLoss`` reads float targets as class probabilities, which
    must match the logits' shape, so (N,) float targets against (N, C) logits raise at
    the first step; ``NLLLoss`` refuses float targets outright. Fix: keep class targets
    as ``torch.long`` indices. Check: a crash at the first loss call; assert
    ``y.dtype == torch.long`` where the batch is unpacked.
    """

    name = "float_class_targets"
    contexts = TRAINING_CONTEXTS
    category = "loss"
    summary = "Class-index targets made float (dtype=torch.float32 / .float() for .long())."
    expected = "crash"
    witness = "differs targets|loss_call", "the class targets reaching the loss are floats"
    crashes = ("target dtype", "scalar type", "not implemented for 'Float'")
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import torch
                from torch import nn
                y = torch.tensor(data.target, dtype=torch.long)
                criterion = nn.CrossEntropyLoss()
                loss = criterion(model(x), y)
            """,
            after="""
                import torch
                from torch import nn
                y = torch.tensor(data.target, dtype=torch.float32)
                criterion = nn.CrossEntropyLoss()
                loss = criterion(model(x), y)
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.nll_loss(out, y.long())
            """,
            after="""
                import torch.nn.functional as F
                loss = F.nll_loss(out, y.float())
            """,
        ),
        Example(
            before="""
                import torch
                from torch import nn
                y_train = (x[:, 0] > 0).long()
                criterion = nn.CrossEntropyLoss()
                loss = criterion(model(x), y)
            """,
            after="""
                import torch
                from torch import nn
                y_train = (x[:, 0] > 0).float()
                criterion = nn.CrossEntropyLoss()
                loss = criterion(model(x), y)
            """,
        ),
    )
    non_examples = (
        # test labels that only feed a scikit-learn report (issue 29)
        """
            import torch
            from torch import nn
            from sklearn.metrics import classification_report
            y_test = torch.tensor(test_labels, dtype=torch.long)
            criterion = nn.CrossEntropyLoss()
            loss = criterion(model(x), batch_labels)
            print(classification_report(y_test.numpy(), predicted.numpy()))
        """,
        # token ids are long too, but they are no targets of a class loss here
        """
            import torch
            from torch import nn
            tokens = torch.tensor(ids, dtype=torch.long)
            criterion = nn.CrossEntropyLoss()
        """,
        # no class-index loss anywhere: a long label tensor is for something else
        """
            import torch
            y = torch.tensor(data.target, dtype=torch.long)
        """,
        """
            import torch.nn.functional as F
            loss = F.cross_entropy(out, y.float())
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        found = self._replacement(node, ctx)
        if found is None:
            return None
        parent = ctx.parent(node)
        if isinstance(parent, cst.Assign) and _only_leaves_torch(parent, ctx):
            return NonSite(
                "the labels only feed code outside torch (a scikit-learn report, .numpy()): "
                "no loss reads them, and a float class index compares equal"
            )
        return found

    def _replacement(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode | None:
        if not isinstance(node, cst.Call) or not uses_loss(ctx, CLASS_INDEX_LOSSES):
            return None
        if method_name(node) == "long" and not node.args:
            if self._is_class_target(node, ctx) or self._assigned_to_labels(node, ctx):
                return node.with_changes(func=node.func.with_changes(attr=cst.Name("float")))  # type: ignore[union-attr]
            return None
        dtype = find_arg(node, keyword="dtype")
        if (
            dtype is not None
            and isinstance(dtype.value, cst.Attribute)
            and dtype.value.attr.value in ("long", "int64")
            and resolve(dtype.value, ctx).under("torch")
            and self._assigned_to_labels(node, ctx)
        ):
            as_float = dtype.value.with_changes(attr=cst.Name("float32"))
            return with_arg_value(node, dtype, as_float)
        return None

    def _is_class_target(self, node: cst.Call, ctx: Context) -> bool:
        parent = ctx.parent(node)
        consumer = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
        return (
            isinstance(consumer, cst.Call)
            and loss_target(consumer) is parent
            and loss_call_kind(consumer, ctx) in CLASS_INDEX_LOSSES
        )

    def _assigned_to_labels(self, node: cst.Call, ctx: Context) -> bool:
        parent = ctx.parent(node)
        return (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
            and is_label_name(parent.targets[0].target.value)
        )


# Reads that take a tensor out of torch: nothing after them reaches a loss.
_LEAVING = frozenset({"numpy", "tolist", "item"})
_OUTSIDE = ("sklearn.", "numpy.", "matplotlib.", "pandas.", "builtins.print")


def _only_leaves_torch(assign: cst.Assign, ctx: Context) -> bool:
    """Is every later read of the assigned labels (``y_test``) a conversion out of torch
    (``y_test.numpy()``) or an argument of scikit-learn, numpy, matplotlib or ``print``
    (issue 29: test labels that only feed ``classification_report``)?"""
    name = assign.targets[0].target.value  # type: ignore[attr-defined]
    uses = [
        n
        for n in ctx.nodes(cst.Name)
        if n.value == name  # type: ignore[attr-defined]
        and not isinstance(ctx.parent(n), cst.AssignTarget)
        and starts_before(assign, n, ctx)
        and not ctx.within(assign, n)
    ]
    return bool(uses) and all(_leaves_torch(use, ctx) for use in uses)


def _leaves_torch(use: cst.CSTNode, ctx: Context) -> bool:
    node = use
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = ctx.parent(parent)
            if not isinstance(call, cst.Call) or call.func is not parent:
                return False
            if parent.attr.value in _LEAVING:
                return True
            if parent.attr.value not in ("cpu", "detach"):
                return False
            node = call
            continue
        if isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            return isinstance(call, cst.Call) and any(
                n.startswith(_OUTSIDE) for n in resolve(call.func, ctx).names
            )
        return False
