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
    method_name,
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
        defined = bool(callee.names) or _star_imports(ctx)  # a typo's ``Variabel`` is not
        if last[:1].isupper() and not tensor and defined:
            return True
    return False


def _star_imports(ctx: Context) -> bool:
    return any(isinstance(i.names, cst.ImportStar) for i in ctx.nodes(cst.ImportFrom))  # type: ignore[attr-defined]


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
        # Issue 29: a move in a tuple assignment (its result alone dropped), a cast chained
        # after the move (kept), a legacy Variable around it, an indexed element.
        Example(
            before="x, y = x.to(device), y.to(device)\n",
            after="x.to(device)\ny = y.to(device)\n",
        ),
        Example(
            before="X = X.to(device).float()\n",
            after="X.to(device)\nX = X.float()\n",
        ),
        Example(
            before="img = Variable(img).cuda()\n",
            after="Variable(img).cuda()\n",
        ),
        Example(
            before="images[0] = images[0].cuda(gpu, non_blocking=True)\n",
            after="images[0].cuda(gpu, non_blocking=True)\n",
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
        if assign is None or len(assign.targets) != 1:
            return None
        target = assign.targets[0].target
        if isinstance(target, cst.Tuple) and isinstance(assign.value, cst.Tuple):
            return self._tuple(node, assign, target, assign.value, ctx)  # type: ignore[arg-type]
        moved = _moved_self(target, assign.value, ctx)
        if moved is None:
            return None
        rejected = _in_place(target, moved, ctx)
        if rejected is not None:
            return rejected
        move = _move_in(assign.value, ctx)
        if move is assign.value or _variable(assign.value, ctx):
            return node.with_changes(body=[cst.Expr(value=assign.value)])  # type: ignore[attr-defined]
        # ``X = X.to(d).float()``: the move's result is dropped, the cast kept (issue 29)
        cast = assign.value.deep_replace(move, receiver(move))  # type: ignore[arg-type]
        return cst.FlattenSentinel(
            [
                node.with_changes(body=[cst.Expr(value=move)]),  # type: ignore[arg-type]
                node.with_changes(body=[assign.with_changes(value=cast)], leading_lines=()),
            ]
        )

    def _tuple(
        self,
        node: cst.SimpleStatementLine,
        assign: cst.Assign,
        targets: cst.Tuple,
        values: cst.Tuple,
        ctx: Context,
    ) -> Replacement | NonSite | None:
        """``a, b = a.cuda(), b.cuda()``: the first element's move is kept as a statement of
        its own, its result thrown away; the other elements stay assigned (issue 29)."""
        if len(targets.elements) != len(values.elements) or len(targets.elements) < 2:
            return None
        for index, (t, v) in enumerate(zip(targets.elements, values.elements)):
            moved = _moved_self(t.value, v.value, ctx)
            if moved is None:
                continue
            rejected = _in_place(t.value, moved, ctx)
            if rejected is not None:
                return rejected
            rest_t = [e.value for i, e in enumerate(targets.elements) if i != index]
            rest_v = [e.value for i, e in enumerate(values.elements) if i != index]
            kept = cst.Assign(
                targets=[cst.AssignTarget(target=_joined(rest_t))], value=_joined(rest_v)
            )
            thrown = node.with_changes(body=[cst.Expr(value=v.value)])
            return cst.FlattenSentinel([thrown, cst.SimpleStatementLine(body=[kept])])
        return None


def _joined(items: list[cst.BaseExpression]) -> cst.BaseExpression:
    if len(items) == 1:
        return items[0]
    return cst.Tuple([cst.Element(i) for i in items], lpar=[], rpar=[])


# Calls around a move that keep the tensor (a legacy ``Variable``, a cast after the move).
_KEEPING_METHODS = frozenset({"float", "long", "double", "half", "int", "contiguous"})


def _moved_self(
    target: cst.BaseExpression, value: cst.BaseExpression, ctx: Context
) -> cst.BaseExpression | None:
    """The tensor ``value`` moves when it is ``target`` itself moved: ``x.to(device)``,
    ``Variable(x).cuda()``, ``Variable(x.to(device))``, ``x.to(device).float()``,
    ``images[0].cuda()`` for ``images[0]``; else None."""
    while True:
        if _variable(value, ctx):
            value = value.args[0].value  # type: ignore[attr-defined]
        elif isinstance(value, cst.Call) and method_name(value) in _KEEPING_METHODS:
            value = receiver(value)  # type: ignore[assignment]
        else:
            break
    if not is_device_move(value, ctx):
        return None
    moved = receiver(value)  # type: ignore[arg-type]
    if _variable(moved, ctx):
        moved = moved.args[0].value  # type: ignore[union-attr]
    return moved if moved is not None and ctx.code(moved) == ctx.code(target) else None


def _move_in(value: cst.BaseExpression, ctx: Context) -> cst.BaseExpression:
    """The device move inside ``value`` (see ``_moved_self``)."""
    while not is_device_move(value, ctx):
        if _variable(value, ctx):
            value = value.args[0].value  # type: ignore[attr-defined]
        elif isinstance(value, cst.Call):
            value = receiver(value)  # type: ignore[assignment]
        else:
            break
    return value


def _variable(expr: cst.BaseExpression | None, ctx: Context) -> bool:
    return (
        isinstance(expr, cst.Call)
        and (dotted_name(expr.func) or "").rsplit(".", 1)[-1] == "Variable"
        and len(expr.args) == 1
    )


def _in_place(
    target: cst.BaseExpression, moved: cst.BaseExpression, ctx: Context
) -> NonSite | None:
    name = dotted_name(target)
    if is_model(moved, ctx) or (
        name is not None and (_object_valued(name, ctx) or _graph_batch(name, ctx))
    ):
        return NonSite(
            f"equivalent: `{ctx.code(target)}` is an object whose .to() moves it in place"
        )
    return None
