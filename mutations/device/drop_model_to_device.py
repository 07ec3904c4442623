"""The ``drop_model_to_device`` operator (DropModelToDevice)."""

from __future__ import annotations

import libcst as cst

from mutations.device._shared import is_device_move
from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    bound_names,
    dotted_name,
    is_model,
    receiver,
    starts_before,
)

# Module methods that run no forward.
_NO_FORWARD = frozenset(
    {"load_state_dict", "state_dict", "parameters", "named_parameters", "apply", "train"}
    | {"eval", "modules", "children", "named_modules", "requires_grad_"}
)


def _branches(node: cst.CSTNode, ctx: Context) -> set[tuple[str, bool]]:
    """The conditions ``node`` runs under in its function: (test code, which branch)."""
    found, child = set(), node
    for parent in ctx.ancestors(node):
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            break
        if isinstance(parent, (cst.For, cst.While, cst.Try, cst.With)) and parent is not node:
            found.add((f"<{type(parent).__name__}>", True))  # runs any number of times
        if isinstance(parent, cst.If):
            found.add((ctx.code(parent.test), parent.body is child))
        child = parent
    return found


def _same_module_between(first: cst.CSTNode, second: cst.CSTNode, name: str, ctx: Context) -> bool:
    """Between the two lines, is ``name`` only rebound to itself wrapped or moved, and not
    otherwise used (no forward on the wrong device in between)?"""
    scope = ctx.enclosing_function(first) or ctx.module
    for use in ctx.nodes_within(scope, cst.Name):
        if use.value != name.split(".")[0]:  # type: ignore[attr-defined]
            continue
        if not (starts_before(first, use, ctx) and starts_before(use, second, ctx)):
            continue
        if ctx.within(second, use) or ctx.within(first, use):
            continue
        parent = ctx.parent(use)
        if isinstance(parent, cst.Attribute) and parent.attr.value in _NO_FORWARD:
            continue  # ``g.load_state_dict(...)``: no forward on the wrong device
        call = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
        if isinstance(call, cst.Call) and dotted_name(call.func) == "print":
            continue
        return False
    return True


def _moved_again(node: cst.CSTNode, move: cst.Call, ctx: Context) -> bool:
    """Is the model also moved to the same device by another line of the function that
    runs whenever this one does (under no condition this one lacks), with the model kept
    between (hifi-gan's ``DistributedDataParallel(g).to(device)`` after ``g = G().to(device)``;
    retinanet's ``.cuda()`` before ``DataParallel(retinanet).cuda()``)?"""
    target = node.targets[0].target if isinstance(node, cst.Assign) else receiver(move)
    name = dotted_name(target)
    if name is None:
        return False
    device = [ctx.code(a) for a in move.args]
    scope = ctx.enclosing_function(node) or ctx.module
    mine = _branches(node, ctx)
    for other in ctx.nodes_within(scope, cst.Assign):
        value = other.value  # type: ignore[attr-defined]
        if other is node or not is_device_move(value, ctx):
            continue
        if [dotted_name(t.target) for t in other.targets] != [name]:  # type: ignore[attr-defined]
            continue
        if [ctx.code(a) for a in value.args] != device or not _branches(other, ctx) <= mine:
            continue
        first, second = (other, node) if starts_before(other, node, ctx) else (node, other)
        if _same_module_between(first, second, name, ctx):
            return True
    return False


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
        # Moved again under a condition: only the first move is a site; the wrapper's
        # second move to the same device changes nothing (issue 29: hifi-gan's DDP).
        Example(
            before="""
                import torch.nn as nn
                from torch.nn.parallel import DistributedDataParallel
                class Net(nn.Module):
                    pass
                def main(device, gpus):
                    net = Net().to(device)
                    if gpus > 1:
                        net = DistributedDataParallel(net).to(device)
                    return net
            """,
            after="""
                import torch.nn as nn
                from torch.nn.parallel import DistributedDataParallel
                class Net(nn.Module):
                    pass
                def main(device, gpus):
                    net = Net()
                    if gpus > 1:
                        net = DistributedDataParallel(net).to(device)
                    return net
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

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        move = self._move(node, ctx)
        if move is None:
            return None
        if _moved_again(node, move, ctx):
            return NonSite("equivalent: another line moves the same model to the same device")
        unmoved = receiver(move)
        if isinstance(node, cst.Expr):
            return cst.RemoveFromParent()
        assert isinstance(node, cst.Assign)
        if dotted_name(node.targets[0].target) == dotted_name(unmoved):
            return cst.RemoveFromParent()
        return node.with_changes(value=unmoved)
