"""The ``drop_train_mode`` operator (DropTrainMode)."""

from __future__ import annotations

import libcst as cst

from mutations.mode._class_modes import UNREAD, mode_left_unread
from mutations.mode._restore import saved_mode_restore
from mutations.mode._shared import (
    mode_blind,
    model_mode_statement,
    switched_model,
    train_mode_restored_later,
)
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Replacement, Swap
from mutator.semantics import (
    code_of,
    drives_training,
    loops_around,
    same_scope,
)


def _can_run_before(earlier: cst.CSTNode, later: cst.CSTNode, ctx: Context) -> bool:
    """Can ``earlier`` execute before ``later``? Only straight-line code after ``later`` in the
    same scope, outside any loop they share, cannot (a final test after training)."""
    if not same_scope(earlier, later, ctx):
        return True
    if ctx.position(earlier).start.line < ctx.position(later).start.line:
        return True
    shared = {id(loop) for loop in loops_around(earlier, ctx)}
    return any(id(loop) in shared for loop in loops_around(later, ctx))


def _restored(evaluation: cst.CSTNode, dropped: cst.CSTNode, ctx: Context) -> bool:
    """Does a later line of the same block (not ``dropped``) switch the model back with
    ``train()``, with no training step or ``return`` between (an evaluation helper that
    cleans up after itself)?"""
    model = code_of(switched_model(model_mode_statement(evaluation, ctx, "eval"), ctx)[0])  # type: ignore[arg-type]
    for statement in ctx.following_statements(evaluation):
        switch = model_mode_statement(statement, ctx, "train")
        same = switch is not None and code_of(switched_model(switch, ctx)[0]) == model
        if same and statement is not dropped:
            return True
        if drives_training(statement, ctx) or ctx.nodes_within(statement, cst.Return):
            return False
    return False


class DropTrainMode(Swap):
    """Delete ``model.train()``.

    Bug: the model is never switched back to training mode after an evaluation pass
    (``model.eval()``), so every later training forward runs in eval mode. Impact:
    dropout is off (no regularisation) and BatchNorm normalises with its running
    statistics instead of batch statistics and stops updating them; training silently
    degrades, often with a larger train/val gap or, with BatchNorm, a worse optimum. The
    site exists only where an ``eval()`` can run before the deleted call, since otherwise
    the model is still in its initial training mode and nothing changes, and only on a model
    with a layer that reads the mode (on one without dropout or batch norm the mutant is
    equivalent, a non-site); a ``train()`` that another one always follows before the
    next training step is no site either, nor one at the end of a trainer class's method
    when every method that runs the model sets its mode first (issue 29). The model's classes are read in the script and
    in the project's files (see drop_eval_mode); a model from a package, a hub or a file is
    assumed to read the mode. Fix: call
    ``model.train()`` at the start of every training epoch (or training step). Where the
    ``train()`` is an evaluation helper's restore of a saved mode (``training =
    model.training`` ... ``if training: model.train()``), the save goes too: the helper
    never restores the mode it found (wkentaro/pytorch-fcn@d10dd30). Check:
    assert ``model.training`` inside the training step, or log the fraction of training
    forwards run in eval mode (a forward hook reading ``module.training``).
    """

    name = "drop_train_mode"
    category = "mode"
    summary = "Remove model.train(): after the first evaluation the model trains in eval mode."
    expected = "degrades"
    witness = "more train_mode_off", "a training forward runs dropout/batch norm in eval mode"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                for epoch in range(3):
                    model.train()
                    fit(model)
                    model.eval()
                    test(model)
            """,
            after="""
                for epoch in range(3):
                    fit(model)
                    model.eval()
                    test(model)
            """,
        ),
        Example(
            before="""
                class T:
                    def fit(self, loader):
                        self.model.train()
                        self.step(loader)

                    def evaluate(self):
                        self.model.eval()
            """,
            after="""
                class T:
                    def fit(self, loader):
                        self.step(loader)

                    def evaluate(self):
                        self.model.eval()
            """,
        ),
        Example(
            before="""
                import torch.nn as nn
                m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1))
                def fit():
                    m.train(True)
                def test():
                    m.eval()
            """,
            after="""
                import torch.nn as nn
                m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1))
                def fit():
                    pass
                def test():
                    m.eval()
            """,
        ),
        # The construction's argument decides a dropout whose default is 0 (issue 29).
        Example(
            before="""
                import torch.nn as nn

                class MLP(nn.Module):
                    def __init__(self, width, dropout=0.0):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(width, width), nn.Dropout(dropout))

                m = MLP(8, dropout=0.2)
                def fit():
                    m.train()
                def test():
                    m.eval()
            """,
            after="""
                import torch.nn as nn

                class MLP(nn.Module):
                    def __init__(self, width, dropout=0.0):
                        super().__init__()
                        self.net = nn.Sequential(nn.Linear(width, width), nn.Dropout(dropout))

                m = MLP(8, dropout=0.2)
                def fit():
                    pass
                def test():
                    m.eval()
            """,
        ),
        Example(  # an evaluation helper that restores the mode it found
            before="""
                def validate(model, loader):
                    training = model.training
                    model.eval()
                    evaluate(model, loader)
                    if training:
                        model.train()
            """,
            after="""
                def validate(model, loader):
                    model.eval()
                    evaluate(model, loader)
            """,
        ),
        # A method runs the network without setting its mode (a summary): the mode the
        # evaluation leaves is read there, so its closing train() stays a site (issue 29).
        Example(
            before="""
                class Model:
                    def fit(self, loader):
                        self.network.train()
                        for x in loader:
                            self.network(x).sum().backward()
                        self.network.eval()

                    def evaluate(self, x):
                        self.network.eval()
                        out = self.network(x)
                        self.network.train()
                        return out

                    def summary(self, x):
                        return self.network(x).shape
            """,
            after="""
                class Model:
                    def fit(self, loader):
                        self.network.train()
                        for x in loader:
                            self.network(x).sum().backward()
                        self.network.eval()

                    def evaluate(self, x):
                        self.network.eval()
                        out = self.network(x)
                        return out

                    def summary(self, x):
                        return self.network(x).shape
            """,
        ),
    )
    non_examples = (
        # No eval() anywhere: the model is in training mode anyway.
        """
            model.train()
            for x in loader:
                step(model, x)
        """,
        # The only eval() is a final test after training.
        """
            model.train()
            for x in loader:
                step(model, x)
            model.eval()
            test(model)
        """,
        # A trainer's train() method is not nn.Module.train().
        """
            trainer = Trainer(model)
            trainer.train()
            model.eval()
        """,
        """
            model.train(False)
            model.eval()
        """,
        # Equivalent: no layer of the model reads the mode (no dropout, no batch norm).
        """
            import torch.nn as nn
            m = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
            def fit():
                m.train()
            def test():
                m.eval()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        call = model_mode_statement(node, ctx, "train")
        if call is None:
            return None
        evals = [
            other
            for other in ctx.nodes(cst.SimpleStatementLine)
            if model_mode_statement(other, ctx, "eval") is not None
            and _can_run_before(other, node, ctx)
        ]
        if not evals:
            return None
        blind = mode_blind(call, ctx)
        if blind is not None:
            return blind
        if all(_restored(other, node, ctx) for other in evals):
            return NonSite(
                "equivalent: every eval() that can run before it is undone by a later train()"
            )
        if train_mode_restored_later(node, ctx):
            return NonSite("equivalent: the loop calls train() again before its next training step")
        if mode_left_unread(node, switched_model(call, ctx)[0], ctx):
            return NonSite(UNREAD)
        return cst.RemoveFromParent()

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        edits = super().plan(node, ctx)
        if not isinstance(edits, dict):
            return edits
        model = code_of(switched_model(model_mode_statement(node, ctx, "train"), ctx)[0])  # type: ignore[arg-type]
        return saved_mode_restore(node, model, ctx) or edits
