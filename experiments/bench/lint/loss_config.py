"""Loss rules about how the loss is configured: reduction, ignore_index, target dtype."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import assigned_name, training_loss_calls
from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import (
    CLASS_INDEX_LOSSES,
    callee_name,
    dotted_name,
    find_arg,
    is_label_name,
    number_value,
)

_LOOP = """
    import torch
    from torch import nn
    criterion = nn.CrossEntropyLoss({options})
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
"""


class ReductionSum(LintRule):
    """``reduction="sum"`` on the loss that is backpropagated: the gradient scale grows with
    the batch size, so the tuned learning rate is wrong."""

    code = "TW306"
    category = "loss"
    summary = "reduction='sum'"
    operators = ("reduction_sum",)
    invalid = (
        """
        from torch import nn
        class Trainer:
            def __init__(self, model, criterion):
                self.model = model
                self.criterion = criterion
            def step(self, x, y):
                loss = self.criterion(self.model(x), y)
                loss.backward()
        trainer = Trainer(model, nn.BCEWithLogitsLoss(reduction="sum"))  # <-
        """,
        """
        import torch
        from torch import nn
        criterion = nn.CrossEntropyLoss(reduction="sum")  # <-
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
        """,
    )
    valid = (
        _LOOP.format(options=""),
        """
        from torch import nn
        class Trainer:
            def __init__(self, model, criterion):
                self.model, self.criterion = model, criterion
                self.metric = nn.L1Loss(reduction="sum")
            def step(self, x, y):
                loss = self.criterion(self.model(x), y)
                loss.backward()
                return self.metric(self.model(x), y).item()
        trainer = Trainer(model, nn.BCEWithLogitsLoss())
        """,
        """
        import torch.nn.functional as F
        total = F.cross_entropy(model(x), y, reduction="sum").item()
        """,
    )

    def check(self, script: Script) -> Report:
        training = list(training_loss_calls(script))
        criteria = {dotted_name(call.func) for call, _ in training}
        # ``Trainer(model, opt, nn.BCEWithLogitsLoss(reduction="sum"))`` binds the loss to
        # ``self.criterion`` (Script binds constructor arguments): the names a value went to.
        bound_to: dict[int, set[str]] = {}
        for name, assigned in script.assignments.items():
            for _, value in assigned:
                bound_to.setdefault(id(value), set()).add(name)
        for call in script.calls:
            arg = find_arg(call, keyword="reduction")
            if (
                arg is None
                or not isinstance(arg.value, cst.SimpleString)
                or arg.value.evaluated_value != "sum"
            ):
                continue
            names = bound_to.get(id(call), set()) | {assigned_name(script, call)}
            if any(call is c for c, _ in training) or names & criteria:
                yield (
                    call,
                    'reduction="sum" on the training loss: the gradient scale grows with the batch size',
                )


class WrongIgnoreIndex(LintRule):
    """``ignore_index`` set to a real class (>= 0): that class never contributes to the loss."""

    code = "TW307"
    category = "loss"
    summary = "ignore_index on a real class"
    operators = ("ignore_index_wrong",)
    invalid = (
        """
        from torch import nn
        criterion = nn.CrossEntropyLoss(ignore_index=0)  # <-
        """,
    )
    valid = (
        """
        from torch import nn
        criterion = nn.CrossEntropyLoss(ignore_index=-100)
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            arg = find_arg(call, keyword="ignore_index")
            value = number_value(arg.value) if arg is not None else None
            if value is not None and value >= 0:
                yield call, f"ignore_index={int(value)} drops a real class from the loss"


class FloatClassTargets(LintRule):
    """A class-index loss (CrossEntropyLoss, NLLLoss) gets float targets, or the labels of a
    file whose losses are all class-index losses are built as a float tensor."""

    code = "TW308"
    category = "loss"
    summary = "float class targets"
    operators = ("float_class_targets",)
    invalid = (
        """
        import torch.nn.functional as F
        loss = F.cross_entropy(model(x), y.float())  # <-
        """,
        """
        import torch
        import torch.nn.functional as F
        y = torch.tensor(labels, dtype=torch.float32)  # <-
        loss = F.cross_entropy(model(x), y)
        """,
    )
    valid = (
        """
        import torch
        import torch.nn.functional as F
        y = torch.tensor(labels, dtype=torch.long)
        loss = F.cross_entropy(model(x), y)
        """,
    )

    def check(self, script: Script) -> Report:
        losses = list(script.loss_calls())
        for call, kind in losses:
            if (
                kind in CLASS_INDEX_LOSSES
                and len(call.args) >= 2
                and re.search(r"\.float\(\)|float32", script.ctx.code(call.args[1].value))
            ):
                label = script.loss_label(call)
                yield call, f"{label} with float targets where class indices are expected"
        if not losses or not all(kind in CLASS_INDEX_LOSSES for _, kind in losses):
            return
        for name, assigned in script.assignments.items():
            if "." in name or not is_label_name(name):
                continue
            for where, value in assigned:
                if isinstance(value, cst.Call) and callee_name(value) == "tensor":
                    dtype = find_arg(value, keyword="dtype")
                    if dtype is not None and "float" in script.ctx.code(dtype.value):
                        yield where, f"class labels {name} built as float for a classification loss"
