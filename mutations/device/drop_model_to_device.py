"""The ``drop_model_to_device`` operator (DropModelToDevice)."""

from __future__ import annotations

import libcst as cst

from mutations.device._shared import is_device_move
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    bound_names,
    dotted_name,
    is_model,
    receiver,
)


class DropModelToDevice(Swap):
    """Leave the model on the CPU: ``model = Net().to(device)`` -> ``model = Net()``, and
    ``model.to(device)`` / ``model = model.to(device)`` deleted.

    Bug: the batches are moved to the accelerator but the parameters are not. Impact: on a
    GPU the first forward raises a device-mismatch error; on a CPU-only run nothing
    changes. Losses such as ``nn.CrossEntropyLoss(weight=w).to(device)`` are not sites.
    Fix: ``model.to(device)`` right after building it, before creating the optimizer.
    Check: a GPU run; assert ``next(model.parameters()).device == x.device`` in the step.
    """

    name = "drop_model_to_device"
    category = "device"
    summary = "Do not move the model to the device (crash on GPU, no effect on CPU)."
    expected = "silent"
    witness = "device", "a tensor on another device reaches an op (.to is a no-op on CPU)"
    crashes = ("same device", "should be the same", "device type")
    node_types = (cst.Assign, cst.Expr)
    examples = (
        Example(
            before="""
                import torch.nn as nn
                class Net(nn.Module):
                    pass
                net = Net().to(device)
                opt = make_opt(net)
            """,
            after="""
                import torch.nn as nn
                class Net(nn.Module):
                    pass
                net = Net()
                opt = make_opt(net)
            """,
        ),
        Example(
            before="""
                def main(model, device):
                    model.cuda()
                    fit(model)
            """,
            after="""
                def main(model, device):
                    fit(model)
            """,
        ),
        Example(
            before="""
                class T:
                    def __init__(self, model, device):
                        self.model = model.to(device)
            """,
            after="""
                class T:
                    def __init__(self, model, device):
                        self.model = model
            """,
        ),
        Example(
            before="""
                model = build_model(cfg)
                model = model.to(args.device)
            """,
            after="model = build_model(cfg)\n",
        ),
        Example(  # a model class imported from the project's own module, moved as built
            before="""
                from model import EncoderCNN
                encoder = EncoderCNN(args.embed_size).to(device)
            """,
            after="""
                from model import EncoderCNN
                encoder = EncoderCNN(args.embed_size)
            """,
        ),
    )
    non_examples = (
        """
            import torch.nn as nn
            criterion = nn.CrossEntropyLoss(weight=w).to(device)
        """,
        "x = x.to(device)\n",
        "trainer.to(device)\n",
        "model = model.to(torch.float16)\n",
        "grid = make_grid(images).to(device)\n",
    )

    def _move(self, node: cst.CSTNode, ctx: Context) -> cst.Call | None:
        if isinstance(node, cst.Assign):
            if len(node.targets) != 1 or len(list(bound_names(node.targets[0].target))) != 1:
                return None
        elif not isinstance(node, cst.Expr):
            return None
        value = node.value
        if not isinstance(value, cst.Call) or not is_device_move(value, ctx):
            return None
        return value if is_model(receiver(value), ctx) else None

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        move = self._move(node, ctx)
        if move is None:
            return None
        unmoved = receiver(move)
        if isinstance(node, cst.Expr):
            return cst.RemoveFromParent()
        assert isinstance(node, cst.Assign)
        if dotted_name(node.targets[0].target) == dotted_name(unmoved):
            return cst.RemoveFromParent()
        return node.with_changes(value=unmoved)
