"""The ``shift_labels`` operator (ShiftLabels)."""

from __future__ import annotations

import libcst as cst

from mutations.data._shared import training_labels
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    as_receiver,
    bound_target,
    code_of,
    parse_expr,
    with_arg_value,
)


class ShiftLabels(Swap):
    """Misalign labels and inputs by one sample.

    Bug: the label of sample ``i`` is paired with the input of sample ``i - 1``, the
    classic off-by-one in a custom ``Dataset.__getitem__`` or in code that aligns inputs
    and targets by hand. Impact: every input carries an unrelated label, so the model
    can only memorize noise: training loss falls slowly (memorization), validation
    accuracy stays at chance. Fix: index inputs and labels with the same index and assert
    alignment once (``dataset[i]`` against the raw data). Check: look at a few decoded
    (input, label) pairs before training; the val-vs-chance comparison and train/val
    curves (train falls, val flat at ln C) expose it.
    """

    name = "shift_labels"
    category = "data"
    summary = "Pair each input with the label of the previous sample (off-by-one)."
    expected = "breaks_training"
    witness = "differs targets", "the targets reaching the training loss differ"
    node_types = (cst.Call, cst.Subscript)
    examples = (
        # A dataset helper used for both splits: the training call is the site.
        Example(
            before="""
                from torch.utils.data import DataLoader, TensorDataset


                def to_dataset(images, targets):
                    return TensorDataset(images / 16.0, targets)


                train_loader = DataLoader(to_dataset(images[:1500], targets[:1500]), shuffle=True)
                test_loader = DataLoader(to_dataset(images[1500:], targets[1500:]))
            """,
            after="""
                from torch.utils.data import DataLoader, TensorDataset


                def to_dataset(images, targets):
                    return TensorDataset(images / 16.0, targets)


                train_loader = DataLoader(to_dataset(images[:1500], targets[:1500].roll(1, dims=0)), shuffle=True)
                test_loader = DataLoader(to_dataset(images[1500:], targets[1500:]))
            """,
        ),
        Example(
            before="train_ds = TensorDataset(X_train, y_train)\n",
            after="train_ds = TensorDataset(X_train, y_train.roll(1, dims=0))\n",
        ),
        Example(
            before="""
                class Digits(Dataset):
                    def __getitem__(self, idx):
                        return self.x[idx], self.y[idx]
            """,
            after="""
                class Digits(Dataset):
                    def __getitem__(self, idx):
                        return self.x[idx], self.y[idx - 1]
            """,
        ),
        Example(
            before="""
                class Pairs(Dataset):
                    def __getitem__(self, i):
                        x = self.inputs[i]
                        y = self.labels[i]
                        return x, y
            """,
            after="""
                class Pairs(Dataset):
                    def __getitem__(self, i):
                        x = self.inputs[i]
                        y = self.labels[i - 1]
                        return x, y
            """,
        ),
    )
    non_examples = (
        "val_ds = TensorDataset(X_val, y_val)\n",
        "ds = TensorDataset(X)\n",
        "ds = TensorDataset(X, mask, y)\n",
        """
            class Chars(Dataset):
                def __getitem__(self, i):
                    return self.data[i:i + 8]
        """,
        """
            def lookup(table, idx):
                return table.x[idx], table.y[idx]
        """,
        """
            import torch
            from torch.utils.data import DataLoader, TensorDataset

            held_out = DataLoader(TensorDataset(images[n_train:], masks[n_train:]), batch_size=128)
        """,
    )

    def _getitem_index(self, node: cst.Subscript, ctx: Context) -> str | None:
        function = ctx.enclosing_function(node)
        if function is None or function.name.value != "__getitem__":
            return None
        params = function.params.params
        if len(params) < 2 or len(node.slice) != 1:
            return None
        index = node.slice[0].slice
        name = params[1].name.value
        if isinstance(index, cst.Index) and isinstance(index.value, cst.Name):
            return name if index.value.value == name else None
        return None

    def _is_returned_label(self, node: cst.Subscript, ctx: Context) -> bool:
        """Is ``node`` the last item of the returned tuple, directly or through a name?"""
        function = ctx.enclosing_function(node)
        returned = [
            r.value
            for r in ctx.nodes_within(function, cst.Return)
            if isinstance(r.value, cst.Tuple) and len(r.value.elements) >= 2
        ]
        lasts = [values.elements[-1].value for values in returned]
        if any(last is node for last in lasts):
            return True
        target = bound_target(node, ctx)
        return isinstance(target, cst.Name) and any(
            isinstance(last, cst.Name) and last.value == target.value for last in lasts
        )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if isinstance(node, cst.Call):
            labels = training_labels(node, ctx, custom=False)
            if labels is None:
                return None
            shifted = parse_expr(f"{code_of(as_receiver(labels.value))}.roll(1, dims=0)")
            return with_arg_value(node, labels, shifted)
        if not isinstance(node, cst.Subscript):
            return None
        index = self._getitem_index(node, ctx)
        if index is None or not self._is_returned_label(node, ctx):
            return None
        element = node.slice[0]
        return node.with_changes(
            slice=[element.with_changes(slice=cst.Index(parse_expr(f"{index} - 1")))]
        )
