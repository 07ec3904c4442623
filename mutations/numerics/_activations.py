"""What the ``drop_activation`` operator reads (private to the numerics package): which calls
are hidden activations, and which are output activations or formula factors."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import NonSite
from mutator.semantics import (
    bound_target,
    callee_name,
    dotted_name,
    identifiers_in,
    is_model,
    is_module_class,
    method_name,
    module_constructors,
    resolve,
    starts_before,
)
from mutator.semantics.scope import argument_values, enclosing_function, values_of
from mutator.semantics.syntax import number_value

_ACTIVATION_CLASSES = (
    "ReLU",
    "LeakyReLU",
    "ReLU6",
    "PReLU",
    "ELU",
    "SELU",
    "GELU",
    "SiLU",
    "Mish",
    "Tanh",
    "Softplus",
    "Sigmoid",
)


_ACTIVATION_FUNCTIONS = {
    *(
        f"torch.nn.functional.{name}"
        for name in ("relu", "leaky_relu", "relu6", "elu", "selu", "gelu", "silu", "mish")
    ),
    *("torch.nn.functional.tanh", "torch.nn.functional.softplus"),
    *("torch.relu", "torch.tanh", "torch.nn.functional.relu_"),
}


_ACTIVATION_METHODS = ("relu", "relu_", "tanh")
# Squashing activations: last in a model they map to the output's range (a generator's
# Tanh to [-1, 1]); a ReLU ending a block is still hidden (a head follows).
_SQUASHING = ("Tanh", "Softplus", "Sigmoid")


def _squashes_output(node: cst.Call, ctx: Context) -> bool:
    """``return torch.tanh(self.out(x))``, or a tanh/softplus whose value no later layer
    reads (``x = torch.tanh(self.fc_mu(x)); return x * scale``, ``std =
    F.softplus(self.fc_std(x))``): an output activation, not a hidden one (issue 22)."""
    name = (callee_name(node) or "").lower()
    squashing = module_constructors(
        node.func, ctx, node, _SQUASHING
    )  # ``self.act4 = nn.Sigmoid()``
    if name not in ("tanh", "softplus") and not squashing:
        return False
    if isinstance(ctx.parent(node), cst.Return):
        return True
    bound = bound_target(node, ctx)
    function = ctx.enclosing_function(node)
    if not isinstance(bound, cst.Name) or function is None:
        return False
    loop = ctx.enclosing(node, (cst.For, cst.While))
    for call in ctx.nodes_within(function, cst.Call):
        if ctx.within(node, call) or not (
            starts_before(node, call, ctx) or (loop is not None and ctx.within(loop, call))
        ):
            continue
        reads_it = any(bound.value in identifiers_in(arg.value, ctx) for arg in call.args)  # type: ignore[attr-defined]
        if reads_it and _is_layer_call(call, ctx):  # type: ignore[arg-type]
            return False  # a layer reads it (now, or in the next iteration): hidden
    return True


def _is_layer_call(call: cst.Call, ctx: Context) -> bool:
    """``self.fc2(h)``, ``self.blocks[i](h)``, ``layer(h)`` from ``self.layers``: a module."""
    func = call.func
    while isinstance(func, cst.Subscript):
        func = func.value
    if isinstance(func, cst.Attribute) and dotted_name(func.value) == "self":
        return True
    return isinstance(func, cst.Name) and is_model(func, ctx)


# Operators that make an activation a factor of a formula (GELU's ``0.5 * x * (1 + tanh(..))``,
# a gate ``i * tanh(g)``), not a nonlinearity between two layers.
_FACTOR_OPERATORS = (cst.Multiply, cst.Divide, cst.Power, cst.MatrixMultiply)
_FACTOR_METHODS = frozenset({"pow", "mul", "div", "square", "matmul", "sqrt"})


def _formula_factor(node: cst.Call, ctx: Context) -> bool:
    """Is the activation's value multiplied, divided or raised inside the arithmetic around
    it (also through torch's own functions: Mish's softplus inside its tanh)?"""
    parent = ctx.parent(node)
    if isinstance(parent, cst.Attribute) and parent.attr.value in _FACTOR_METHODS:
        return True  # ``torch.tanh(a).pow(2)``: SAC's log-prob correction (issue 29)
    while isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Arg)):
        if isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            if not isinstance(call, cst.Call) or not resolve(call, ctx, strict=False).under(
                "torch"
            ):
                return False
            parent = call
        elif isinstance(parent.operator, _FACTOR_OPERATORS):
            return True
        parent = ctx.parent(parent)
    return False


def _unless_factor(node: cst.Call, ctx: Context) -> NonSite | None:
    if not _formula_factor(node, ctx):
        return None
    return NonSite(
        "a factor of a hand-written formula (GELU's tanh, a gate): removing it changes the "
        "formula, it does not remove a hidden nonlinearity"
    )


def _activation_class(expr: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> bool:
    """Is ``expr`` an activation class (``nn.ReLU``), or a name that only holds such (bound
    to one, or the target of a loop over a list of them)?"""
    names = resolve(expr, ctx).names
    if names:
        return all(
            n.startswith("torch.nn.") and n.rsplit(".", 1)[-1] in _ACTIVATION_CLASSES for n in names
        )
    if not isinstance(expr, cst.Name):
        return False
    held = values_of(expr, ctx, at)
    for loop in ctx.nodes(cst.For):
        if isinstance(loop.target, cst.Name) and loop.target.value == expr.value:  # type: ignore[attr-defined]
            if not isinstance(loop.iter, (cst.List, cst.Tuple)):  # type: ignore[attr-defined]
                return False
            held += [e.value for e in loop.iter.elements]  # type: ignore[attr-defined]
    return bool(held) and all(
        not isinstance(h, cst.Name) and _activation_class(h, ctx, at) for h in held
    )


def _built_by_activation_parameter(func: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> bool:
    """Is the called layer (``self.act0``) built by ``activation()``, a constructor parameter
    whose default and every argument are activation classes (``def __init__(self,
    activation=nn.ReLU)``; issue 29)?"""
    values = values_of(func, ctx, at)
    if not values:
        return False
    for value in values:
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
            return False
        function = enclosing_function(value, ctx)
        name = value.func.value
        params = function.params.params if function is not None else ()
        param = next((p for p in params if p.name.value == name), None)
        if param is None or param.default is None:
            return False
        passed = [held for held, _ in argument_values(function, name, ctx)]  # type: ignore[arg-type]
        if not all(_activation_class(v, ctx, value) for v in [param.default, *passed]):
            return False
    return True


def _in_autograd_function(node: cst.CSTNode, ctx: Context) -> bool:
    owner = ctx.enclosing(node, cst.ClassDef)
    return isinstance(owner, cst.ClassDef) and any(
        resolve(base.value, ctx).matches({"torch.autograd.Function"}) for base in owner.bases
    )


def _relu_clamp(node: cst.Call, ctx: Context) -> bool:
    """``h.clamp(min=0)`` (the ReLU of hand-written networks) in model code, or on a
    matrix product (``h = x.mm(w1)``) between two layers of weights (issue 29)."""
    if method_name(node) not in ("clamp", "clamp_") or len(node.args) != 1:
        return False
    arg = node.args[0]
    if (arg.keyword is not None and arg.keyword.value != "min") or number_value(arg.value) != 0:
        return False
    if _in_model_code(node, ctx):
        return True
    tensor = node.func.value  # type: ignore[union-attr]
    held = [tensor] if isinstance(tensor, cst.Call) else values_of(tensor, ctx, node)
    return bool(held) and all(
        isinstance(h, cst.Call) and method_name(h) in ("mm", "matmul") for h in held
    )


def _in_model_code(node: cst.CSTNode, ctx: Context) -> bool:
    """Inside an ``nn.Module`` subclass, or a ``forward`` function."""
    function = ctx.enclosing_function(node)
    if function is not None and function.name.value == "forward":
        return True
    owner = ctx.enclosing(node, cst.ClassDef)
    return isinstance(owner, cst.ClassDef) and is_module_class(owner, ctx)
