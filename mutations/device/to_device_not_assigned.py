"""The ``to_device_not_assigned`` operator (ToDeviceNotAssigned)."""

from __future__ import annotations

import libcst as cst

from mutations.device._shared import is_device_move
from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    MODULE_PASSTHROUGH,
    assigned_values,
    bound_names,
    dotted_name,
    imports,
    is_model,
    receiver,
    resolve,
    single_assignment,
    unwrap_calls,
)


def _object_valued(name: str, ctx: Context) -> bool:
    """Was ``name`` built by a class other than a tensor's (a loss, a layer, the script's own
    criterion): ``Module.to`` moves it in place. ``Variable(...)`` and ``torch.*Tensor``
    build tensors."""
    for value in assigned_values(ctx, name):
        built = unwrap_calls(value, MODULE_PASSTHROUGH)
        if not isinstance(built, cst.Call):
            continue
        callee = resolve(built.func, ctx)
        last = (dotted_name(built.func) or "").rsplit(".", 1)[-1]
        tensor = last == "Variable" or (callee.under("torch") and not callee.under("torch.nn"))
        if last[:1].isupper() and not tensor:
            return True
    return False


def _graph_batch(name: str, ctx: Context) -> bool:
    """A PyTorch Geometric batch from a ``for`` loop: its ``.to()`` moves it in place."""
    if not any(b.qualified.startswith("torch_geometric") for b in imports(ctx).all_bindings):
        return False
    return any(name in bound_names(loop.target) for loop in ctx.nodes(cst.For))  # type: ignore[attr-defined]


class ToDeviceNotAssigned(Swap):
    """Drop the assignment of a tensor's device move: ``x = x.to(device)`` becomes
    ``x.to(device)``.

    Bug: ``Tensor.to()`` and ``.cuda()`` return a moved copy; unlike ``Module.to()`` they do
    not move in place, so the statement without its assignment does nothing. Real fix:
    hunkim/PyTorchZeroToAll@d7e3a11 (``inputs.cuda()``, ``labels.cuda()`` and
    ``h_0.cuda()`` left the RNN example's tensors on the CPU). Impact: on a GPU the tensor
    stays on the CPU and the first operation mixing it with the model's CUDA tensors fails
    ("Expected all tensors to be on the same device"); on a CPU nothing changes, so the bug
    waits for the first GPU run. A model or ``nn`` module is no site (its ``.to`` moves it in
    place: equivalent). Fix: keep the result (``x = x.to(device)``). Check: assert
    ``x.device == device`` after the move; a linter flags a discarded ``.to()`` result.
    """

    name = "to_device_not_assigned"
    category = "device"
    summary = "x = x.to(device) -> x.to(device): the moved copy is thrown away."
    expected = "silent"
    witness = "device", "a tensor on another device reaches an op (.to is a no-op on CPU)"
    crashes = ("same device", "should be the same", "device type")
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                inputs = torch.randn(8, 4)
                if torch.cuda.is_available():
                    inputs = inputs.cuda()
            """,
            after="""
                inputs = torch.randn(8, 4)
                if torch.cuda.is_available():
                    inputs.cuda()
            """,
        ),
        Example(
            before="""
                for images, labels in loader:
                    images = images.to(device)
            """,
            after="""
                for images, labels in loader:
                    images.to(device)
            """,
        ),
    )
    non_examples = (
        # A model moves in place: dropping the assignment changes nothing.
        """
            model = Net()
            model = model.to(device)
        """,
        """
            import torch.nn as nn
            criterion = nn.CrossEntropyLoss()
            criterion = criterion.cuda()
        """,
        # A cast, not a device move.
        "x = x.to(torch.float32)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        assign = single_assignment(node)
        if assign is None or len(assign.targets) != 1 or not is_device_move(assign.value, ctx):
            return None
        name = dotted_name(assign.targets[0].target)
        moved = receiver(assign.value)  # type: ignore[arg-type]
        if name is None or dotted_name(moved) != name:
            return None
        if is_model(moved, ctx) or _object_valued(name, ctx) or _graph_batch(name, ctx):
            return NonSite(f"equivalent: `{name}` is an object whose .to() moves it in place")
        return node.with_changes(body=[cst.Expr(value=assign.value)])  # type: ignore[attr-defined]
