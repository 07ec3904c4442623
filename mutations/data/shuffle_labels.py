"""The ``shuffle_labels`` operator (ShuffleLabels)."""

from __future__ import annotations

import libcst as cst

from mutations.data._shared import rewritable_labels
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    code_of,
    module_alias,
    parse_expr,
    with_arg_value,
)


class ShuffleLabels(Swap):
    """Permute the training labels independently of the inputs.

    Bug: labels are shuffled on their own (a permutation applied to ``y`` but not to
    ``X``, typically when someone shuffles arrays one at a time). Impact: the
    input-label relation is destroyed while the label distribution looks perfect; the
    model memorizes at best, validation accuracy sits at chance and the training loss
    stays near ln C for a long time. Fix: draw one permutation and index inputs and
    labels with it together. Check: compare validation accuracy against chance, or
    overfit one batch and test a second batch; also spot-check (input, label) pairs.
    """

    name = "shuffle_labels"
    category = "data"
    summary = "Shuffle the training labels separately from their inputs."
    expected = "breaks_training"
    witness = "differs targets", "the targets reaching the training loss differ"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import torch
                train_ds = TensorDataset(X_train, y_train)
            """,
            after="""
                import torch
                train_ds = TensorDataset(X_train, y_train[torch.randperm(len(y_train))])
            """,
        ),
        Example(
            before="""
                import torch
                ds = TensorDataset(X[train_idx], y[train_idx])
            """,
            after="""
                import torch
                ds = TensorDataset(X[train_idx], y[train_idx[torch.randperm(len(train_idx))]])
            """,
        ),
        Example(
            before="""
                import torch
                class Pairs(Dataset):
                    def __init__(self, x, y):
                        self.x = x
                        self.y = y
                    def __getitem__(self, idx):
                        return self.x[idx], self.y[idx]
                train_ds = Pairs(X_train, y_train)
                val_ds = Pairs(X_val, y_val)
            """,
            after="""
                import torch
                class Pairs(Dataset):
                    def __init__(self, x, y):
                        self.x = x
                        self.y = y
                    def __getitem__(self, idx):
                        return self.x[idx], self.y[idx]
                train_ds = Pairs(X_train, y_train[torch.randperm(len(y_train))])
                val_ds = Pairs(X_val, y_val)
            """,
        ),
    )
    non_examples = (
        "train_ds = TensorDataset(X_train, y_train)\n",  # no torch to draw a permutation with
        # A dataset class whose constructor does not take the labels.
        """
            import torch
            class Chars(Dataset):
                def __init__(self, text, block):
                    self.text, self.block = text, block
                def __getitem__(self, i):
                    return self.text[i], self.text[i + 1]
            ds = Chars(text, 8)
        """,
        """
            import torch
            val_ds = TensorDataset(X_val, y_val)
        """,
        """
            import torch
            ds = TensorDataset(X, torch.tensor(labels))
        """,
        """
            import torch
            from torch.utils.data import DataLoader, TensorDataset

            held_out = DataLoader(TensorDataset(images[n_train:], masks[n_train:]), batch_size=128)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        labels = rewritable_labels(node, ctx)
        if labels is None:
            return None
        torch = module_alias(ctx, "torch")
        value = labels.value
        indexed = value.slice[0].slice if isinstance(value, cst.Subscript) else None
        if isinstance(indexed, cst.Index) and len(value.slice) == 1:
            # ``y[idx]`` -> ``y[idx[perm]]``: the indices are shuffled for the labels only.
            index = code_of(indexed.value)
            permuted = f"{index}[{torch}.randperm(len({index}))]"
            shuffled = value.with_changes(
                slice=[value.slice[0].with_changes(slice=cst.Index(parse_expr(permuted)))]
            )
        else:
            code = code_of(value)
            shuffled = parse_expr(f"{code}[{torch}.randperm(len({code}))]")
        return with_arg_value(node, labels, shuffled)
