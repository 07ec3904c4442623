"""The ``eval_mode_before_training`` operator (EvalModeBeforeTraining)."""

from __future__ import annotations

import libcst as cst

from mutations.mode._class_modes import UNREAD, mode_left_unread
from mutations.mode._shared import (
    forwarded_switch,
    mode_blind,
    mode_set,
    model_mode_statement,
    overwritten_next_iteration,
    switched_model,
    train_mode_restored_later,
)
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import with_arg_value


class EvalModeBeforeTraining(Operator):
    """Change ``model.train()`` into ``model.eval()``.

    Bug: the model is put in evaluation mode where training should start (the classic
    ``model.eval()  # set up before training``). Impact: every training forward runs with
    dropout disabled and BatchNorm using (and no longer updating) its running statistics;
    no error is raised, the loss still falls, but regularisation is gone and BatchNorm
    models train against stale statistics, so validation results degrade. A model with
    no layer that reads the mode is no site (the mutant is equivalent), nor the last line
    of a helper whose caller switches to train mode again before its next step, nor a
    ``train()`` late in an iteration of a loop whose every iteration opens on ``train()``
    (a trainer's restore after its evaluation) when nothing trains after the loop, nor one
    at the end of a trainer class's method when every method that runs the model sets its
    mode first (TabNet's ``_predict_epoch``).
    The model's classes are read in the script and in the project's files (see
    drop_eval_mode); a model from a package, a hub or a file is assumed to read the mode.
    Fix: call
    ``model.train()`` before training and ``model.eval()`` only around evaluation. Check:
    assert ``model.training`` in the training step; log the eval-mode fraction of
    training forwards; compare train/val curves (the gap grows).
    """

    name = "eval_mode_before_training"
    category = "mode"
    summary = "Replace model.train() by model.eval(): the model trains in evaluation mode."
    expected = "degrades"
    witness = "more train_mode_off", "a training forward runs dropout/batch norm in eval mode"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                model.train()
                for x, y in loader:
                    step(model, x, y)
            """,
            after="""
                model.eval()
                for x, y in loader:
                    step(model, x, y)
            """,
        ),
        Example(
            before="""
                def fit(self):
                    self.model.train(mode=True)
            """,
            after="""
                def fit(self):
                    self.model.eval()
            """,
        ),
        # A library's own mode switch, one level into the script's method (issue 29).
        Example(
            before="""
                class Model:
                    def _set_training_mode(self, training):
                        self.network.train(training)

                    def fit(self, loader):
                        self._set_training_mode(True)
                        for x, y in loader:
                            self.step(x, y)

                    def evaluate(self, loader):
                        self._set_training_mode(False)
                        return [self.network(x) for x, _ in loader]
            """,
            after="""
                class Model:
                    def _set_training_mode(self, training):
                        self.network.train(training)

                    def fit(self, loader):
                        self._set_training_mode(False)
                        for x, y in loader:
                            self.step(x, y)

                    def evaluate(self, loader):
                        self._set_training_mode(False)
                        return [self.network(x) for x, _ in loader]
            """,
        ),
        # Every epoch opens with train(): the one after the evaluation is overwritten before
        # the next step, and nothing trains after the loop (issue 29: a fit() library), so
        # only the first is a site.
        Example(
            before="""
                import torch.nn as nn
                model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
                for epoch in range(3):
                    model.train(True)
                    for x in loader:
                        model(x).sum().backward()
                        opt.step()
                    if val is not None:
                        evaluate(model, val)
                        model.train(mode=True)
            """,
            after="""
                import torch.nn as nn
                model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
                for epoch in range(3):
                    model.eval()
                    for x in loader:
                        model(x).sum().backward()
                        opt.step()
                    if val is not None:
                        evaluate(model, val)
                        model.train(mode=True)
            """,
        ),
        # A fit() library whose every method that runs the network sets its mode first: the
        # evaluation's closing train() is never read, only the epoch's own is a site (issue
        # 29: TabNet's _predict_epoch).
        Example(
            before="""
                class Model:
                    def __init__(self, network):
                        self.network = network

                    def fit(self, loader, valid, epochs):
                        for epoch in range(epochs):
                            self._train_epoch(loader)
                            self._predict_epoch(valid)
                        self.network.eval()

                    def _train_epoch(self, loader):
                        self.network.train()
                        for x in loader:
                            self.network(x).sum().backward()

                    def _predict_epoch(self, loader):
                        self.network.eval()
                        scores = [self.network(x) for x in loader]
                        self.network.train()
                        return scores
            """,
            after="""
                class Model:
                    def __init__(self, network):
                        self.network = network

                    def fit(self, loader, valid, epochs):
                        for epoch in range(epochs):
                            self._train_epoch(loader)
                            self._predict_epoch(valid)
                        self.network.eval()

                    def _train_epoch(self, loader):
                        self.network.eval()
                        for x in loader:
                            self.network(x).sum().backward()

                    def _predict_epoch(self, loader):
                        self.network.eval()
                        scores = [self.network(x) for x in loader]
                        self.network.train()
                        return scores
            """,
        ),
    )
    non_examples = (
        "trainer.train()\n",
        "model.eval()\n",
        "model.train(False)\n",
        "x = model.train()\n",
        # Equivalent: the model's layers compute the same in both modes.
        """
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc1 = nn.Linear(4, 16)
                    self.fc2 = nn.Linear(16, 3)

                def forward(self, x):
                    return self.fc2(self.fc1(x).relu())

            model = Net()
            model.train()
        """,
        # A config dict sets every dropout to 0 (issue 29: GPT-2 finetuned with drop_rate 0).
        """
            import torch.nn as nn

            class GPT(nn.Module):
                def __init__(self, cfg):
                    super().__init__()
                    self.emb = nn.Embedding(cfg["vocab"], cfg["dim"])
                    self.drop = nn.Dropout(cfg["drop_rate"])

            CONFIG = {"vocab": 100, "dim": 16, "drop_rate": 0.0}
            model = GPT(CONFIG)
            model.train()
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        call = model_mode_statement(node, ctx, "train")
        if call is None:
            return None
        assert isinstance(call.func, (cst.Attribute, cst.Name))
        blind = mode_blind(call, ctx)
        if blind is not None:
            return blind
        if train_mode_restored_later(node, ctx) or overwritten_next_iteration(node, call, ctx):
            return NonSite("equivalent: the loop calls train() again before its next training step")
        if mode_left_unread(node, switched_model(call, ctx)[0], ctx):
            return NonSite(UNREAD)
        forwarded = forwarded_switch(call, ctx) if mode_set(call) is None else None
        if forwarded is not None:  # ``self._set_training_mode(True)`` -> ``(False)``
            return {call: with_arg_value(call, forwarded[2], cst.Name("False"))}
        assert isinstance(call.func, cst.Attribute)
        return {
            call: call.with_changes(func=call.func.with_changes(attr=cst.Name("eval")), args=())
        }
