"""How values flow through a module's ``forward``: which assignments take a parametrised
layer's output and feed another one (the analysis behind ``detach_hidden``)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from mutator.context import Context
from mutator.semantics import (
    callee_name,
    dotted_name,
    identifiers_in,
    is_module_class,
    method_name,
    start_of,
)

# Modules without parameters: a detach right before one of them cuts nothing new.
_PARAMETER_FREE = frozenset(
    {
        "ReLU",
        "ReLU6",
        "GELU",
        "SiLU",
        "Mish",
        "Tanh",
        "Sigmoid",
        "LeakyReLU",
        "ELU",
        "SELU",
        "Softplus",
        "Softmax",
        "LogSoftmax",
        "Hardtanh",
        "Hardswish",
        "Dropout",
        "Dropout1d",
        "Dropout2d",
        "Dropout3d",
        "AlphaDropout",
        "Identity",
        "Flatten",
        "Unflatten",
        "MaxPool1d",
        "MaxPool2d",
        "MaxPool3d",
        "AvgPool1d",
        "AvgPool2d",
        "AvgPool3d",
        "AdaptiveAvgPool1d",
        "AdaptiveAvgPool2d",
        "AdaptiveMaxPool1d",
        "AdaptiveMaxPool2d",
        "Upsample",
    }
)


# Modules that return tuples: ``.detach()`` on their result would crash.
_TUPLE_RETURNING = frozenset({"LSTM", "GRU", "RNN", "MultiheadAttention"})


# Calls whose result is not a tensor (or not a single one).
_NON_TENSOR_METHODS = frozenset(
    {"size", "dim", "numel", "item", "tolist", "chunk", "split", "unbind", "topk", "sort"}
)


_NON_TENSOR_FUNCTIONS = frozenset(
    {"len", "int", "float", "bool", "str", "tuple", "list", "dict", "range", "zip", "enumerate"}
)


def forward_of(node: cst.CSTNode, ctx: Context) -> cst.FunctionDef | None:
    """The ``forward`` method of an nn.Module subclass that directly encloses ``node``."""
    function = ctx.enclosing_function(node)
    if function is None or function.name.value != "forward":
        return None
    cls = ctx.parent(ctx.parent(function))
    if isinstance(cls, cst.ClassDef) and is_module_class(cls, ctx):
        return function
    return None


def _submodule_class(attr: str, forward: cst.FunctionDef, ctx: Context) -> str | None:
    """Class name assigned to ``self.<attr>`` in the module class holding ``forward``."""
    cls = ctx.parent(ctx.parent(forward))
    assert cls is not None
    for assign in ctx.nodes_within(cls, cst.Assign):
        assigns_attr = any(dotted_name(t.target) == f"self.{attr}" for t in assign.targets)
        if assigns_attr and isinstance(assign.value, cst.Call):
            return callee_name(assign.value)
    return None


def tensor_valued(value: cst.BaseExpression, forward: cst.FunctionDef, ctx: Context) -> bool:
    if isinstance(value, cst.BinaryOperation | cst.Subscript):
        return True
    if not isinstance(value, cst.Call):
        return False
    if method_name(value) in _NON_TENSOR_METHODS:
        return False
    if isinstance(value.func, cst.Name) and value.func.value in _NON_TENSOR_FUNCTIONS:
        return False
    layer = _self_attr(value)
    return layer is None or _submodule_class(layer, forward, ctx) not in _TUPLE_RETURNING


_SPLITS = frozenset({"split", "chunk", "unbind", "tensor_split"})


def splits(expr: cst.CSTNode) -> bool:
    """``q, k, v = self.c_attn(x).split(n, dim=2)``: parts of one output. Detaching one
    part leaves the layer (and all before it) learning through the others."""
    return isinstance(expr, cst.Call) and method_name(expr) in _SPLITS


def _holds_function(attr: str, cls: cst.CSTNode, ctx: Context) -> bool:
    """Is ``self.<attr>`` only ever assigned the script's own functions (``self.normalize =
    normalize_to_neg_one_to_one if auto_normalize else identity``)?"""
    functions = {f.name.value for f in ctx.nodes(cst.FunctionDef)}  # type: ignore[attr-defined]

    def is_function(value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.IfExp):
            return is_function(value.body) and is_function(value.orelse)
        return isinstance(value, cst.Name) and value.value in functions

    values = [
        assign.value  # type: ignore[attr-defined]
        for assign in ctx.nodes_within(cls, cst.Assign)
        if any(dotted_name(t.target) == f"self.{attr}" for t in assign.targets)  # type: ignore[attr-defined]
    ]
    return bool(values) and all(is_function(value) for value in values)


def _self_attr(call: cst.Call) -> str | None:
    """``self.fc1(...)`` / ``self.blocks[i](...)`` -> ``fc1`` / ``blocks``."""
    func = call.func
    while isinstance(func, cst.Subscript):
        func = func.value
    if (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "self"
    ):
        return func.attr.value
    return None


class ForwardFlow:
    """Which assignments of a ``forward`` sit downstream/upstream of a parametrised layer."""

    def __init__(self, forward: cst.FunctionDef, ctx: Context) -> None:
        self.forward = forward
        self.ctx = ctx
        statements: list[cst.CSTNode] = [
            *ctx.nodes_within(forward, cst.Assign),
            *ctx.nodes_within(forward, cst.AugAssign),
            *ctx.nodes_within(forward, cst.Return),
        ]
        statements = [s for s in statements if ctx.enclosing_function(s) is forward]
        self.statements = sorted(statements, key=lambda s: start_of(s, ctx))
        # Names bound by ``for layer in self.layers:``: calling them applies a layer.
        self.layer_names: set[str] = set()
        for loop in ctx.nodes_within(forward, cst.For):
            if "self" in identifiers_in(loop.iter, ctx):
                self.layer_names |= identifiers_in(loop.target, ctx)

    def applies_layer(self, expr: cst.CSTNode, depth: int = 0) -> bool:
        return any(
            self.is_layer_call(call, depth) for call in self.ctx.nodes_within(expr, cst.Call)
        )  # type: ignore[arg-type]

    def is_layer_call(self, call: cst.Call, depth: int = 0) -> bool:
        """``self.fc(x)``, ``layer(x)`` for a layer of ``self.layers``: runs parameters."""
        attr = _self_attr(call)
        if attr is not None and self._is_layer(attr, depth):
            return True
        return isinstance(call.func, cst.Name) and call.func.value in self.layer_names

    def _is_layer(self, attr: str, depth: int) -> bool:
        """Does ``self.<attr>(...)`` run parameters: a submodule that has some, or a method
        of the class that calls one (``self.encode``); not a helper that only builds
        tensors (``self._init_hidden``, ``self.random_times``) or a plain function stored
        on ``self`` (``self.normalize = normalize_to_neg_one_to_one``)."""
        built = _submodule_class(attr, self.forward, self.ctx)
        if built is not None:
            return built not in _PARAMETER_FREE
        cls = self.ctx.parent(self.ctx.parent(self.forward))
        methods = [
            f
            for f in self.ctx.nodes_within(cls, cst.FunctionDef)  # type: ignore[arg-type]
            if f.name.value == attr and self.ctx.parent(self.ctx.parent(f)) is cls  # type: ignore[attr-defined]
        ]
        if methods:
            return depth < 2 and self.applies_layer(methods[0].body, depth + 1)  # type: ignore[attr-defined]
        return not _holds_function(attr, cls, self.ctx)  # type: ignore[arg-type]

    def _expression(self, statement: cst.CSTNode) -> cst.CSTNode | None:
        return getattr(statement, "value", None)

    def _targets(self, statement: cst.CSTNode) -> set[str]:
        if isinstance(statement, cst.Assign):
            found: set[str] = set()
            for target in statement.targets:
                found |= identifiers_in(target.target, self.ctx)
            return found
        if isinstance(statement, cst.AugAssign):
            return identifiers_in(statement.target, self.ctx)
        return set()

    def at_layer_output(self, site: cst.Assign) -> bool:
        """The value is a layer's output, so a detach here cuts that layer and all before it.

        Either the value applies a layer itself (``x = F.relu(self.fc1(x))``) or it is the
        first use of a layer output that was unpacked from a tuple and so could not be
        detached where it was made (``out, _ = self.lstm(x)`` then ``last = out[:, -1]``).
        Assignments that only continue from a detachable output (``x = self.dropout(x)``
        after ``x = self.fc1(x)``) cut the same layers again and are not sites.
        """
        if self.applies_layer(site.value):
            return True
        unpacked: set[str] = set()
        for statement in self.statements:
            if statement is site:
                return bool(identifiers_in(site.value, self.ctx) & unpacked)
            targets = self._targets(statement)
            expression = self._expression(statement)
            unpacked -= targets  # rebinding a name ends its life as an unpacked output
            if (
                isinstance(statement, cst.Assign)
                and not isinstance(statement.targets[0].target, cst.Name)
                and expression is not None
                and self.applies_layer(expression)
                and not splits(expression)
            ):
                unpacked |= targets
        return False

    def _after(self, site: cst.Assign) -> Iterator[tuple[cst.CSTNode, cst.CSTNode]]:
        """The statements after ``site``, in source order, with the expression each computes
        (statements that compute none are skipped)."""
        after = False
        for statement in self.statements:
            if statement is site:
                after = True
                continue
            expression = self._expression(statement)
            if after and expression is not None:
                yield statement, expression

    def is_model_output(self, site: cst.Assign, name: str) -> bool:
        """Does the value reach ``return`` through no further layer (``output =
        self.linear(h)`` collected into the returned list)? Then it is the model's output."""
        flow = {name}
        for statement, expression in self._after(site):
            uses = bool(identifiers_in(expression, self.ctx) & flow)
            plain = uses and not self.applies_layer(expression)
            if isinstance(statement, cst.Return):
                if plain:
                    return True
            elif plain:
                flow |= self._targets(statement)
            elif not isinstance(statement, cst.AugAssign):  # ``+=`` keeps what it held
                flow -= self._targets(statement)  # rebound to something else
        return False

    def feeds_a_layer(self, site: cst.Assign, name: str) -> bool:
        """The detached value still flows into a parametrised layer (so the output needs grad)."""
        in_loop = self.ctx.enclosing(site, (cst.For, cst.While))
        if (
            in_loop is not None
            and self.ctx.within(self.forward, in_loop)
            and name in identifiers_in(site.value, self.ctx)
            and self.applies_layer(site.value)
        ):
            return True  # the next iteration feeds it to the layer again
        flow = {name}
        for statement, expression in self._after(site):
            if identifiers_in(expression, self.ctx) & flow:
                if self.applies_layer(expression):
                    return True
                flow |= self._targets(statement)
        return False
