"""Split rules: training and validation data that overlap (the whole data set trained on
while a part of it is evaluated, a validation loader over training data)."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import (
    bound_target,
    callee_name,
    dotted_name,
    is_data_loader,
    split_role,
)


class LeakySplit(LintRule):
    """``train, val = perm, perm[n:]``: the training part is the whole set. Also
    ``train_ds = Chunks(data, 64)`` beside ``val_ds = Chunks(data[n:], 64)`` in the same
    function: the training set is built from all of the data the validation set slices."""

    code = "TW703"
    category = "data"
    summary = "train split overlaps validation"
    operators = ("train_val_leakage",)
    invalid = (
        """
        train_idx, val_idx = perm, perm[800:]  # <-
        """,
        """
        train_data = batchify(data, 20)  # <-
        val_data = batchify(data[n_train:], 10)
        """,
    )
    valid = (
        """
        train_idx, val_idx = perm[:800], perm[800:]
        """,
        """
        train_data = batchify(data[:n_train], 20)
        val_data = batchify(data[n_train:], 10)
        test_data = batchify(corpus.test, 10)
        """,
        """
        full_ds = Chunks(data, 64)
        val_ds = Chunks(data[n_train:], 64)
        """,
    )

    def check(self, script: Script) -> Report:
        yield from _whole_data_for_training(script)
        for assign in script.ctx.nodes(cst.Assign):
            target, value = assign.targets[0].target, assign.value
            if not (isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple)):
                continue
            if len(target.elements) != len(value.elements):
                continue
            pairs = {
                dotted_name(t.value) or "": v.value for t, v in zip(target.elements, value.elements)
            }
            for name, expr in pairs.items():
                if "train" not in name.lower() or not isinstance(expr, cst.Name):
                    continue
                for other, other_expr in pairs.items():
                    if (
                        re.search("val|test", other.lower())
                        and isinstance(other_expr, cst.Subscript)
                        and dotted_name(other_expr.value) == expr.value
                    ):
                        yield (
                            assign,
                            f"{name} is all of {expr.value} while {other} is a slice of it",
                        )


def _whole_data_for_training(script: Script) -> Report:
    """``train_x = f(data, ...)`` and ``val_x = f(data[...], ...)`` in one function."""
    built: dict[tuple[int, str], list[tuple[str, cst.Assign, cst.BaseExpression]]] = {}
    for assign in script.ctx.nodes(cst.Assign):
        value = assign.value
        if len(assign.targets) != 1 or not isinstance(value, cst.Call) or not value.args:
            continue
        callee = callee_name(value)
        role = split_role(script.ctx.code(assign.targets[0].target))
        if callee and role in {"train", "eval"}:
            key = (id(script.unit(assign)), callee)
            built.setdefault(key, []).append((role, assign, value.args[0].value))
    for uses in built.values():
        sliced = {
            dotted_name(data.value)
            for role, _, data in uses
            if role == "eval" and isinstance(data, cst.Subscript)
        }
        for role, assign, data in uses:
            name = dotted_name(data) if isinstance(data, (cst.Name, cst.Attribute)) else None
            if role == "train" and name is not None and name in sliced:
                yield (
                    assign,
                    f"the training set is built from all of {name}; validation uses a slice of it",
                )


class ValidationLoaderOnTrainingData(LintRule):
    """A loader named for validation built on the training set (``val_loader =
    DataLoader(train_ds)``): every validation number is measured on data the model trained
    on, so it looks better than the model is."""

    code = "TW707"
    category = "data"
    summary = "validation loader over training data"
    operators = ("train_val_leakage", "validate_on_training_data")
    confidence = "medium"
    invalid = (
        """
        from torch.utils.data import DataLoader
        val_loader = DataLoader(train_ds, batch_size=256)  # <-
        """,
        """
        from torch.utils.data import DataLoader, TensorDataset
        val_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=256)  # <-
        """,
    )
    valid = (
        """
        from torch.utils.data import DataLoader
        val_loader = DataLoader(val_ds, batch_size=256)
        """,
        """
        from torch.utils.data import DataLoader, TensorDataset
        val_loader = DataLoader(TensorDataset(x[n_train:], y[n_train:]), batch_size=128)
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            if not call.args or not is_data_loader(call, script.ctx):
                continue
            target = bound_target(call, script.ctx)
            dataset = call.args[0].value
            if target is None or split_role(script.ctx.code(target)) != "eval":
                continue
            if _names_training_data(dataset, script):
                yield call, f"{script.ctx.code(target)} is built on {script.ctx.code(dataset)}"


def _names_training_data(dataset: cst.BaseExpression, script: Script) -> bool:
    """``train_ds``, ``self.train_set`` or ``TensorDataset(X_train, y_train)``: data named as
    training data as a whole. An expression such as ``x[n_train:]`` names the split point,
    not the data, so it never counts."""
    if isinstance(dataset, cst.Call):
        parts = [arg.value for arg in dataset.args if arg.keyword is None]
    else:
        parts = [dataset]
    return bool(parts) and all(
        isinstance(part, (cst.Name, cst.Attribute)) and split_role(script.ctx.code(part)) == "train"
        for part in parts
    )
