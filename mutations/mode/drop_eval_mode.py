"""The ``drop_eval_mode`` operator (DropEvalMode)."""

from __future__ import annotations

import libcst as cst

from mutations.mode._class_modes import UNREAD, mode_left_unread
from mutations.mode._final import evaluated_nowhere_after, next_use_sets_eval
from mutations.mode._shared import mode_blind, model_mode_statement, switched_model
from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap


class DropEvalMode(Swap):
    """Delete ``model.eval()`` before evaluation.

    Bug: validation runs with the model still in training mode. Impact: dropout stays
    active, so validation metrics are noisy and pessimistic; BatchNorm normalises with
    validation-batch statistics and updates its running statistics on validation data,
    leaking it into the model used later. Model selection and early stopping then act
    on wrong numbers. A model without such layers is no site (the mutant is equivalent),
    nor an ``eval()`` that nothing runs the model after (before saving), nor one whose next
    use is a call of the script's own function that sets eval mode itself (a ``predict``), nor
    one at the end of a trainer class's method when every method that runs the model sets
    its mode first (issue 29: TabNet's ``fit``).
    The model's classes are read where they are: in the script, in the project's files it
    imports (``from modules import UNet``), or, for a model a sibling script hands in
    (``engine.train(model=model)``), there; a ``Dropout`` whose probability is 0 on every
    path (a default ``dropout=0.``, a config dict's ``"drop_rate": 0.0``) reads no mode
    (issue 29). A model from a package, a hub, a file or built by name is assumed to read
    the mode (x-transformers' models, a trainer class handed its model by its user).
    Fix: call ``model.eval()`` before every evaluation pass (and
    ``model.train()`` after it). Check: evaluate the same batch twice and compare the
    outputs (they differ with dropout active), or assert ``not model.training`` in the
    evaluation function.
    """

    name = "drop_eval_mode"
    category = "mode"
    summary = "Remove model.eval(): evaluation runs with dropout on and BatchNorm updating."
    expected = "degrades"
    witness = "more eval_mode_on", "an evaluation forward runs dropout/batch norm in train mode"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                def evaluate(model, loader):
                    model.eval()
                    with torch.no_grad():
                        return score(model, loader)
            """,
            after="""
                def evaluate(model, loader):
                    with torch.no_grad():
                        return score(model, loader)
            """,
        ),
        Example(
            before="""
                net.train(False)
                acc = test(net)
            """,
            after="acc = test(net)\n",
        ),
        # A library's own mode switch: its call with False is the eval() (issue 29).
        Example(
            before="""
                class Model:
                    def _set_training_mode(self, training):
                        self.network.train(training)

                    def evaluate(self, loader):
                        self._set_training_mode(False)
                        return [self.network(x) for x, _ in loader]
            """,
            after="""
                class Model:
                    def _set_training_mode(self, training):
                        self.network.train(training)

                    def evaluate(self, loader):
                        return [self.network(x) for x, _ in loader]
            """,
        ),
        # The model handed in through ``**kwargs`` (a framework's ``fit``, issue 29).
        Example(
            before="""
                def evaluate(**kwargs):
                    kwargs["model"].eval()
                    return [kwargs["model"](x) for x, _ in kwargs["loader"]]
            """,
            after="""
                def evaluate(**kwargs):
                    return [kwargs["model"](x) for x, _ in kwargs["loader"]]
            """,
        ),
        # A model built by name (a registry, ``models.__dict__[arch]``) may hold batch
        # norm: unknown, so a site (issue 29: BatchNorm ResNets were read as mode-free).
        Example(
            before="""
                import torch
                import torchvision.models as models
                model = torch.nn.DataParallel(models.__dict__[args.arch]())
                def validate(loader):
                    model.eval()
                    return [model(x) for x, _ in loader]
            """,
            after="""
                import torch
                import torchvision.models as models
                model = torch.nn.DataParallel(models.__dict__[args.arch]())
                def validate(loader):
                    return [model(x) for x, _ in loader]
            """,
        ),
        # Built inside the project's own context manager, which may swap its layers
        # (lit-llama's ``with lora(dropout=0.05):``): unknown, so a site (issue 29).
        Example(
            before="""
                import contextlib
                import torch.nn as nn
                @contextlib.contextmanager
                def lora(dropout):
                    yield patch_linear(dropout)
                with lora(dropout=0.05):
                    model = nn.Sequential(nn.Linear(4, 4))
                def evaluate(x):
                    model.eval()
                    return model(x)
            """,
            after="""
                import contextlib
                import torch.nn as nn
                @contextlib.contextmanager
                def lora(dropout):
                    yield patch_linear(dropout)
                with lora(dropout=0.05):
                    model = nn.Sequential(nn.Linear(4, 4))
                def evaluate(x):
                    return model(x)
            """,
        ),
        # A module that rebinds its globals from argv (nanoGPT's configurator): ``dropout
        # = 0.0`` is only the default, so the dropout may be on (issue 29).
        Example(
            before="""
                import sys
                import torch.nn as nn
                dropout = 0.0
                for arg in sys.argv[1:]:
                    key, val = arg.split("=")
                    globals()[key] = float(val)
                model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(dropout))
                def evaluate(x):
                    model.eval()
                    return model(x)
            """,
            after="""
                import sys
                import torch.nn as nn
                dropout = 0.0
                for arg in sys.argv[1:]:
                    key, val = arg.split("=")
                    globals()[key] = float(val)
                model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(dropout))
                def evaluate(x):
                    return model(x)
            """,
        ),
        # The next call sets eval mode itself (a fit() library's predict, issue 29): only
        # predict's own eval() is a site, not the one in fit before calling it.
        Example(
            before="""
                import torch.nn as nn
                class Model:
                    def __init__(self):
                        self.network = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))

                    def predict(self, x):
                        self.network.eval()
                        return self.network(x)

                    def fit(self, loader, x_valid):
                        for x in loader:
                            self.network(x).sum().backward()
                        self.network.eval()
                        return self.predict(x_valid)
            """,
            after="""
                import torch.nn as nn
                class Model:
                    def __init__(self):
                        self.network = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))

                    def predict(self, x):
                        return self.network(x)

                    def fit(self, loader, x_valid):
                        for x in loader:
                            self.network(x).sum().backward()
                        self.network.eval()
                        return self.predict(x_valid)
            """,
        ),
    )
    non_examples = (
        # A final eval() before saving: nothing runs the model after it (issue 29).
        """
            import torch
            import torch.nn as nn
            def main():
                model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
                for x in loader:
                    model(x).sum().backward()
                model.eval()
                torch.save(model.state_dict(), "model.pt")
        """,
        "model.train()\n",
        "result = evaluator.eval()\n",
        "expr.eval()\n",
        """
            import torch


            def export_onnx(model, path, device):
                model.eval()
                dummy_input = torch.randn(1, 3, 8, 8).to(device)
                torch.onnx.export(model, dummy_input, path)
        """,
        # Equivalent: a convolution stack without dropout or batch norm ignores the mode.
        """
            import torch.nn as nn
            net = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
            def evaluate(loader):
                net.eval()
                return [net(x) for x, _ in loader]
        """,
        # ... wrapped in DataParallel too: the wrapper has the mode of what it wraps.
        """
            import torch
            import torch.nn as nn
            net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
            net = torch.nn.DataParallel(net)
            def evaluate(loader):
                net.eval()
                return [net(x) for x, _ in loader]
        """,
        # ... nor a dropout whose probability defaults to 0 (issue 29), layers spread from a
        # list the class builds.
        """
            import torch.nn as nn

            class MLP(nn.Module):
                def __init__(self, sizes, dropout=0.0):
                    super().__init__()
                    layers = []
                    for a, b in zip(sizes, sizes[1:]):
                        layers.extend([nn.Linear(a, b), nn.ReLU(), nn.Dropout(dropout)])
                    self.net = nn.Sequential(*layers)

            model = MLP([4, 8, 2])
            def evaluate(x):
                model.eval()
                return model(x)
        """,
        # ... nor blocks copied by a generator, a bare call of the module's function that a
        # method shares the name of, a model rebound by ``model = model.cuda()`` (issue 29).
        """
            import torch.nn as nn

            def cache(n):
                return n * 2

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList(Block() for _ in range(2))

                def cache(self, n):
                    return cache(n)

            model = Net()
            model = model.cuda()
            def evaluate(x):
                model.eval()
                return model(x)
        """,
        # ... and so do PyG's graph convolutions (issue 22: link prediction on Cora).
        """
            import torch
            from torch_geometric.nn import GCNConv

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = GCNConv(16, 32)
                    self.conv2 = GCNConv(32, 8)

                def forward(self, x, edge_index):
                    return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

            model = Net()
            def test(data):
                model.eval()
                return model(data.x, data.edge_index)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        call = model_mode_statement(node, ctx, "eval")
        if call is None:
            return None
        blind = mode_blind(call, ctx)
        if blind is not None:
            return blind
        model = switched_model(call, ctx)[0]
        if evaluated_nowhere_after(node, model, ctx):
            return NonSite("equivalent: nothing runs the model after this eval() (it is saved)")
        if next_use_sets_eval(node, model, ctx):
            return NonSite("equivalent: the next call that uses the model sets eval mode itself")
        if mode_left_unread(node, model, ctx):
            return NonSite(UNREAD)
        return cst.RemoveFromParent()
