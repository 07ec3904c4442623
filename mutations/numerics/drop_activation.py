"""The ``drop_activation`` operator (DropActivation)."""

from __future__ import annotations

import libcst as cst

from mutations.numerics._layer_lists import in_layer_list
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    bound_target,
    callee_name,
    dotted_name,
    identifiers_in,
    is_model,
    is_module_class,
    method_name,
    module_constructors,
    nn_class,
    positional_args,
    resolve,
    starts_before,
    without_element,
)

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
    if name not in ("tanh", "softplus"):
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


def _in_model_code(node: cst.CSTNode, ctx: Context) -> bool:
    """Inside an ``nn.Module`` subclass, or a ``forward`` function."""
    function = ctx.enclosing_function(node)
    if function is not None and function.name.value == "forward":
        return True
    owner = ctx.enclosing(node, cst.ClassDef)
    return isinstance(owner, cst.ClassDef) and is_module_class(owner, ctx)


class DropActivation(Operator):
    """Remove a hidden nonlinearity (``nn.ReLU()`` in a Sequential, ``F.relu(x)`` -> ``x``).

    Bug: an activation between two layers is lost (deleted while editing, or a layer
    list built without it). Impact: two stacked linear layers collapse into one linear
    map, so the network can only fit linear decision boundaries: on nearly linear tasks
    nothing shows, otherwise the loss plateaus above the reference and accuracy drops.
    An activation that is a factor of a hand-written formula (GELU's tanh, an LSTM gate) is
    no site: removing it changes the formula instead; one inside a log-probability
    correction (SAC's ``log(1 - tanh(a)^2)``) is not told apart (1 of 63 corpus mutants,
    issue 22). Fix: put the nonlinearity back between the layers. Check: compare train/val curves
    with the reference (a higher floor), or overfit a small nonlinear batch; a model
    summary shows consecutive Linear layers.
    """

    name = "drop_activation"
    category = "numerics"
    summary = "A hidden nonlinearity removed: stacked linear layers collapse into one."
    expected = "degrades"
    witness = "differential", "different numbers: a nonlinearity is gone"
    node_types = (cst.Call,)
    examples = (
        # A hidden Sigmoid (issue 29: a course's iris MLP).
        Example(
            before="""
                from torch import nn
                net = nn.Sequential(nn.Linear(4, 64), nn.Sigmoid(), nn.Linear(64, 3))
            """,
            after="""
                from torch import nn
                net = nn.Sequential(nn.Linear(4, 64), nn.Linear(64, 3))
            """,
        ),
        # A block helper's list of layers (issue 29: the GAN zoo).
        Example(
            before="""
                from torch import nn
                class Generator(nn.Module):
                    def __init__(self):
                        def block(in_feat, out_feat):
                            layers = [nn.Linear(in_feat, out_feat)]
                            layers.append(nn.LeakyReLU(0.2, inplace=True))
                            return layers
                        self.model = nn.Sequential(*block(8, 16), nn.Linear(16, 4))
            """,
            after="""
                from torch import nn
                class Generator(nn.Module):
                    def __init__(self):
                        def block(in_feat, out_feat):
                            layers = [nn.Linear(in_feat, out_feat)]
                            return layers
                        self.model = nn.Sequential(*block(8, 16), nn.Linear(16, 4))
            """,
        ),
        Example(
            before="""
                from torch import nn
                class Discriminator(nn.Module):
                    def __init__(self):
                        def block(cin, cout):
                            return [nn.Conv2d(cin, cout, 3, 2, 1), nn.LeakyReLU(0.2), nn.Dropout2d(0.25)]
                        self.model = nn.Sequential(*block(1, 16), *block(16, 32))
            """,
            after="""
                from torch import nn
                class Discriminator(nn.Module):
                    def __init__(self):
                        def block(cin, cout):
                            return [nn.Conv2d(cin, cout, 3, 2, 1), nn.Dropout2d(0.25)]
                        self.model = nn.Sequential(*block(1, 16), *block(16, 32))
            """,
        ),
        Example(
            before="""
                from torch import nn
                model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
            """,
            after="""
                from torch import nn
                model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                from torch import nn
                class Net(nn.Module):
                    def forward(self, x):
                        x = F.relu(self.fc1(x))
                        return self.fc2(x)
            """,
            after="""
                import torch.nn.functional as F
                from torch import nn
                class Net(nn.Module):
                    def forward(self, x):
                        x = self.fc1(x)
                        return self.fc2(x)
            """,
        ),
        Example(
            before="""
                from torch import nn
                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.act = nn.GELU()
                    def forward(self, x):
                        return self.fc2(self.act(self.fc1(x)))
            """,
            after="""
                from torch import nn
                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.act = nn.GELU()
                    def forward(self, x):
                        return self.fc2(self.fc1(x))
            """,
        ),
        Example(
            before="""
                import torch
                class Net(torch.nn.Module):
                    def forward(self, x):
                        return self.fc2(self.fc1(x).relu())
            """,
            after="""
                import torch
                class Net(torch.nn.Module):
                    def forward(self, x):
                        return self.fc2(self.fc1(x))
            """,
        ),
    )
    non_examples = (
        # A final Sigmoid maps to probabilities: an output activation (a discriminator's).
        """
            from torch import nn
            D = nn.Sequential(nn.Linear(784, 256), nn.Linear(256, 1), nn.Sigmoid())
        """,
        # Output bounds that no later layer reads (issue 22: TD3's action, SAC's std).
        """
            import torch
            import torch.nn.functional as F
            from torch import nn
            class Actor(nn.Module):
                def forward(self, x):
                    x = self.fc1(x)
                    std = F.softplus(self.fc_std(x))
                    a = torch.tanh(self.fc_mu(x))
                    return a * self.action_scale + self.action_bias, std
        """,
        # a hinge loss is not an activation of the model
        """
            import torch.nn.functional as F
            loss = F.relu(1 - margin).mean()
        """,
        """
            from torch import nn
            head = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
        """,
        """
            from torch import nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.act = nn.ReLU()
        """,
        # a generator's output Tanh maps to the data range: it is no hidden nonlinearity
        """
            from torch import nn
            generator = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4), nn.Tanh())
        """,
        """
            import torch
            from torch import nn
            class Decoder(nn.Module):
                def forward(self, z):
                    return torch.tanh(self.fc2(self.fc1(z)))
        """,
        # GELU written out: the tanh is a factor of the formula, not a hidden activation.
        """
            import math
            import torch
            from torch import nn
            class NewGELU(nn.Module):
                def forward(self, x):
                    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        """,
        # A tanh raised to a power inside a log-prob correction (SAC, issue 29).
        """
            import torch
            from torch import nn
            class Policy(nn.Module):
                def forward(self, x):
                    action = self.dist(x).rsample()
                    log_prob = self.dist(x).log_prob(action)
                    real_log_prob = log_prob - torch.log(1 - torch.tanh(action).pow(2) + 1e-7)
                    return self.head(real_log_prob)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        if not isinstance(node, cst.Call):
            return None
        parent = ctx.parent(node)
        if nn_class(node, ctx, _ACTIVATION_CLASSES):
            sequential = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
            if isinstance(sequential, cst.Call) and nn_class(sequential, ctx, ("Sequential",)):
                if parent is sequential.args[-1] and nn_class(node, ctx, _SQUASHING):
                    return NonSite("an output activation (a generator's Tanh), not a hidden one")
                return {sequential: without_element(sequential, parent)}  # type: ignore[arg-type]
            return in_layer_list(node, ctx) if _in_model_code(node, ctx) else None
        if not _in_model_code(node, ctx) or _squashes_output(node, ctx):
            return None
        positional = positional_args(node)
        if not node.args and method_name(node) in _ACTIVATION_METHODS:
            return _unless_factor(node, ctx) or {node: node.func.value}  # type: ignore[union-attr]
        if not positional:
            return None
        if resolve(node.func, ctx).matches(_ACTIVATION_FUNCTIONS) or module_constructors(
            node.func, ctx, node, _ACTIVATION_CLASSES
        ):
            return _unless_factor(node, ctx) or {node: positional[0].value}
        return None
