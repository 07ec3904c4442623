"""Data rules: shuffling, targets that equal inputs, leaky splits, corrupted labels,
mixed batch dimensions."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import (
    callee_name,
    dotted_name,
    find_arg,
    has_star_args,
    is_data_loader,
    is_false,
    is_label_name,
    loader_role,
    method_name,
    number_value,
)


class TrainLoaderNotShuffled(LintRule):
    """A DataLoader over training data (by its dataset's or its own name) without
    ``shuffle=True`` and without a sampler: every epoch sees the same order. Silent when
    arguments arrive through ``*args``/``**kwargs`` (``DataLoader(ds, **train_kwargs)``):
    shuffle may be in there."""

    code = "TW701"
    category = "data"
    summary = "training loader not shuffled"
    operators = ("no_shuffle",)
    confidence = "medium"
    invalid = (
        """
        from torch.utils.data import DataLoader
        train_loader = DataLoader(train_ds, batch_size=8)  # <-
        """,
    )
    valid = (
        """
        from torch.utils.data import DataLoader
        train_loader = DataLoader(train_ds, batch_size=8, shuffle=True)
        val_loader = DataLoader(val_ds, batch_size=8)
        """,
        """
        from torch.utils.data import DataLoader
        train_loader = DataLoader(ds[:n_train], batch_size=8, shuffle=True)
        val_loader = DataLoader(TensorDataset(x[n_train:], y[n_train:]), batch_size=128)
        """,
        """
        from torch.utils.data import DataLoader
        train_kwargs = {"batch_size": 64}
        accel_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}
        train_kwargs.update(accel_kwargs)
        train_loader = DataLoader(train_ds, **train_kwargs)
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            if not call.args or not is_data_loader(call, script.ctx):
                continue
            # The name the loader is bound to decides, then its dataset argument (shared
            # with the operators): ``DataLoader(ds[n_train:])`` bound to ``val_loader`` is
            # a validation loader, whatever substrings its arguments hold.
            if loader_role(call, script.ctx) != "train":
                continue
            if find_arg(call, keyword="sampler") or find_arg(call, keyword="batch_sampler"):
                continue
            shuffle = find_arg(call, keyword="shuffle", position=2)
            if shuffle is None and has_star_args(call):
                continue  # shuffle may arrive in the unpacked arguments: cannot know
            if shuffle is None or is_false(shuffle.value):
                yield call, "training DataLoader without shuffle=True"


class IdenticalInputsAndTargets(LintRule):
    """Targets built exactly like the inputs (``x, y = seq[:, :-1], seq[:, :-1]``): there is
    nothing to predict."""

    code = "TW702"
    category = "data"
    summary = "targets equal inputs"
    operators = ("unshifted_lm_targets",)
    invalid = (
        """
        x, y = seq[:, :-1], seq[:, :-1]  # <-
        """,
        """
        def batch(i):  # <-
            x = data[i : i + 8]
            y = data[i : i + 8]
            return x, y
        """,
    )
    valid = (
        """
        x, y = seq[:, :-1], seq[:, 1:]
        """,
    )

    def check(self, script: Script) -> Report:
        for assign in script.ctx.nodes(cst.Assign):
            target, value = assign.targets[0].target, assign.value
            if (
                isinstance(target, cst.Tuple)
                and isinstance(value, cst.Tuple)
                and len(value.elements) == 2
                and len(target.elements) == 2
            ):
                names = [dotted_name(e.value) or "" for e in target.elements]
                codes = [script.ctx.code(e.value) for e in value.elements]
                if is_label_name(names[1]) and codes[0] == codes[1]:
                    yield (
                        assign,
                        f"{names[1]} is the same slice as {names[0]}: targets equal the inputs",
                    )
        for function in script.ctx.nodes(cst.FunctionDef):
            values = {}
            for name in ("x", "y"):
                found = [v for _, v in script.assignments_in_unit(name, function)]
                if len(found) == 1:
                    values[name] = script.ctx.code(found[0])
            if len(values) == 2 and values["x"] == values["y"]:
                yield function, "targets y are built exactly like inputs x: nothing to predict"


class CorruptedLabels(LintRule):
    """Labels rolled, permuted or randomised against their inputs in a TensorDataset, or a
    ``__getitem__`` that pairs an input with its neighbour's label."""

    code = "TW704"
    category = "data"
    summary = "labels corrupted"
    operators = ("shift_labels", "shuffle_labels", "label_noise")
    invalid = (
        """
        ds = TensorDataset(x, y.roll(1))  # <-
        """,
        """
        ds = TensorDataset(x, y[torch.randperm(len(y))])  # <-
        """,
        """
        from torch.utils.data import Dataset
        class DigitsDataset(Dataset):
            def __init__(self, x, y):
                self.x, self.y = x, y
        noisy = torch.where(torch.rand(y.shape) < 0.3, torch.randint_like(y, 10), y)
        train_ds = DigitsDataset(X_train, noisy)
        train_ds = DigitsDataset(X_train, y_train[torch.randperm(len(y_train))])  # <-
        """,
        """
        class Pairs(Dataset):
            def __getitem__(self, i):
                return self.x[i], self.y[i + 1]  # <-
        """,
    )
    valid = (
        """
        ds = TensorDataset(x, y)
        """,
        """
        import torch
        ds = TensorDataset(torch.randn(256, 4), torch.randint(0, 2, (256,)))
        """,
        """
        from torch.utils.data import Dataset
        class Pairs(Dataset):
            def __init__(self, x, y):
                self.x, self.y = x, y
        perm = torch.randperm(len(x))
        ds = Pairs(x[perm], y[perm])
        """,
        """
        class Concat(Dataset):
            def __getitem__(self, idx):
                d = bisect.bisect_right(self.cumulative_sizes, idx)
                sample_idx = idx if d == 0 else idx - self.cumulative_sizes[d - 1]
                return self.datasets[d][sample_idx]
        """,
    )

    def check(self, script: Script) -> Report:
        datasets = {"TensorDataset"} | _dataset_classes(script)
        for call in script.calls:
            positional = [arg.value for arg in call.args if arg.keyword is None]
            if callee_name(call) not in datasets or len(positional) < 2:
                continue
            labels = script.ctx.code(positional[-1])
            if any("rand" in script.ctx.code(other) for other in positional[:-1]):
                continue  # synthetic data: random inputs with random labels
            if ".roll(" in labels:
                yield call, "labels are rolled against their inputs (off by one)"
            elif "randperm" in labels:
                yield call, "labels are permuted separately from their inputs"
            elif "randint_like" in labels or "randint(" in labels:
                yield call, "random labels are mixed into the training labels"
        for function in script.functions.get("__getitem__", []):
            for node in script.ctx.nodes_within(function, cst.Subscript):
                shifted = re.fullmatch(r"self\.\w+\[(\w+) [-+] 1\]", script.ctx.code(node))
                if shifted and _paired_with_unshifted(script, node, shifted.group(1)):
                    yield node, "__getitem__ pairs an input with a neighbour's label"


def _paired_with_unshifted(script: Script, node: cst.Subscript, index: str) -> bool:
    """Is ``self.y[i + 1]`` returned beside ``self.x[i]`` (not an offset lookup such as
    ``self.cumulative_sizes[idx - 1]``)?"""
    pair = script.ctx.parent(script.ctx.parent(node))  # Subscript -> Element -> Tuple
    if not isinstance(pair, cst.Tuple):
        return False
    return any(
        re.fullmatch(rf"self\.\w+\[{index}\]", script.ctx.code(element.value))
        for element in pair.elements
    )


def _dataset_classes(script: Script) -> set[str]:
    """Classes of this file that subclass a ``Dataset`` (``class DigitsDataset(Dataset)``)."""
    return {
        cls.name.value
        for cls in script.ctx.nodes(cst.ClassDef)
        if any((dotted_name(base.value) or "").endswith("Dataset") for base in cls.bases)
    }


class MixedBatchDims(LintRule):
    """A reshape/view right after moving dimension 0 (the batch) elsewhere: samples mix
    within the batch."""

    code = "TW706"
    category = "data"
    summary = "batch dimension mixed"
    operators = ("mix_batch_dims",)
    invalid = (
        """
        flat = x.transpose(0, 1).reshape(batch_size, -1)  # <-
        """,
    )
    valid = (
        """
        flat = x.reshape(batch_size, -1)
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            if method_name(call) not in {"reshape", "view"} or not isinstance(
                call.func, cst.Attribute
            ):
                continue
            inner = call.func.value
            if isinstance(inner, cst.Call) and method_name(inner) in {
                "movedim",
                "transpose",
                "permute",
            }:
                first = inner.args[0].value if inner.args else None
                if first is not None and number_value(first) == 0:
                    yield (
                        call,
                        "batch dimension moved before a reshape: samples mix within the batch",
                    )
