"""The ``metric_into_train_accumulator`` operator (MetricIntoTrainAccumulator)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import HELD_OUT, assignments, dotted_name, parse_expr, single_assignment


def _training_twin(expr: cst.BaseExpression, ctx: Context) -> str | None:
    """``self.mean_loss_train`` for ``self.mean_loss_val`` when the script binds it."""
    name = dotted_name(expr)
    if name is None:
        return None
    owner, _, last = name.rpartition(".")
    if not HELD_OUT.search(last):
        return None
    twin = HELD_OUT.sub(lambda m: "Train" if m.group(0)[0].isupper() else "train", last, count=1)
    full = f"{owner}.{twin}" if owner else twin
    bindings = assignments(ctx, full)
    if not owner:  # a plain name must be this function's own (else: UnboundLocalError)
        scope = ctx.enclosing_function(expr)
        bindings = [b for b in bindings if ctx.enclosing_function(b.node) is scope]
    return full if bindings else None


def _metric_receiver(statement: cst.CSTNode) -> cst.BaseExpression | None:
    """``self.ds_val`` of ``acc = self.ds_val.evaluate_accuracy(out, y)``."""
    assign = single_assignment(statement)
    if assign is None or not isinstance(assign.value, cst.Call):
        return None
    func = assign.value.func
    return func.value if isinstance(func, cst.Attribute) else None


class MetricIntoTrainAccumulator(Swap):
    """In the evaluation code, write to (or compute with) the training twin of a
    validation name: ``self.mean_loss_val += ...`` -> ``self.mean_loss_train += ...``.

    Bug: the validation loop was copied from the training loop and some names were not
    renamed, so validation numbers are added to the training accumulators (or computed
    with the training split's object). Real fix: stefanopini/simple-HRNet@7585a4c (the
    validation loss and accuracy went into ``mean_loss_train``/``mean_acc_train`` and were
    computed with ``ds_train``). Impact: training runs unchanged, but what it reports is
    wrong: the validation curve stays at zero (or at its initial value) and the training
    numbers are inflated by the validation ones, so model selection, early stopping and
    the train/val gap a reader judges overfitting by are all fiction. Only names whose
    training twin the script binds are sites, and only in evaluation code. Fix: use the
    validation accumulators in validation code (one helper for both loops avoids the
    copy). Check: the validation metric must change between epochs and differ from the
    training one; assert the accumulators being reset match the ones printed.
    """

    name = "metric_into_train_accumulator"
    category = "mode"
    summary = "Validation numbers added to the training accumulators (copied loop, not renamed)."
    expected = "misleads"
    witness = "differs reported", "the script reports other numbers for the same training"
    node_types = (cst.SimpleStatementLine,)
    contexts = frozenset({"eval"})
    examples = (
        Example(
            before="""
                import torch

                class Trainer:
                    def __init__(self):
                        self.mean_loss_train = 0.0
                        self.mean_loss_val = 0.0

                    def _val(self):
                        with torch.no_grad():
                            for x, y in self.dl_val:
                                loss = self.loss_fn(self.model(x), y)
                                self.mean_loss_val += loss.item()
            """,
            after="""
                import torch

                class Trainer:
                    def __init__(self):
                        self.mean_loss_train = 0.0
                        self.mean_loss_val = 0.0

                    def _val(self):
                        with torch.no_grad():
                            for x, y in self.dl_val:
                                loss = self.loss_fn(self.model(x), y)
                                self.mean_loss_train += loss.item()
            """,
        ),
    )
    non_examples = (
        # The training twin is another function's local: the mutant would raise instead.
        """
            def train():
                train_loss = 0.0

            def test():
                test_loss = 0.0
                with torch.no_grad():
                    for x, y in test_loader:
                        test_loss += criterion(model(x), y).item()
        """,
        # No training twin to confuse it with.
        """
            import torch
            val_loss = 0.0
            with torch.no_grad():
                for x, y in val_loader:
                    val_loss += criterion(model(x), y).item()
        """,
        # The training loop itself.
        """
            train_loss, val_loss = 0.0, 0.0
            for x, y in train_loader:
                loss = criterion(model(x), y)
                loss.backward()
                train_loss += loss.item()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.SimpleStatementLine)
        small = node.body[0] if len(node.body) == 1 else None
        if isinstance(small, cst.AugAssign):
            twin = _training_twin(small.target, ctx)
            if twin is None:
                return None
            return node.with_changes(body=[small.with_changes(target=parse_expr(twin))])
        holder = _metric_receiver(node)
        twin = _training_twin(holder, ctx) if holder is not None else None
        if twin is None:
            return None
        assign = single_assignment(node)
        func = assign.value.func.with_changes(value=parse_expr(twin))  # type: ignore[union-attr]
        value = assign.value.with_changes(func=func)  # type: ignore[union-attr]
        return node.with_changes(body=[assign.with_changes(value=value)])  # type: ignore[union-attr]
