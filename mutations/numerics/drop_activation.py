"""The ``drop_activation`` operator (DropActivation)."""

from __future__ import annotations

import libcst as cst

from mutations.numerics._activations import (
    _ACTIVATION_CLASSES,
    _ACTIVATION_FUNCTIONS,
    _ACTIVATION_METHODS,
    _SQUASHING,
    _built_by_activation_parameter,
    _in_autograd_function,
    _in_model_code,
    _relu_clamp,
    _squashes_output,
    _unless_factor,
)
from mutations.numerics._layer_lists import in_layer_list
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    method_name,
    module_constructors,
    nn_class,
    positional_args,
    resolve,
    without_element,
)


class DropActivation(Operator):
    """Remove a hidden nonlinearity (``nn.ReLU()`` in a Sequential, ``F.relu(x)`` -> ``x``).

    Bug: an activation between two layers is lost (deleted while editing, or a layer
    list built without it). Impact: two stacked linear layers collapse into one linear
    map, so the network can only fit linear decision boundaries: on nearly linear tasks
    nothing shows, otherwise the loss plateaus above the reference and accuracy drops.
    An activation that is a factor of a hand-written formula (GELU's tanh, an LSTM gate) is
    no site: removing it changes the formula instead; one inside a log-probability
    correction (SAC's ``log(1 - tanh(a)^2)``) is not told apart (1 of 63 corpus mutants,
    issue 22). A hand-written ReLU (``h.clamp(min=0)`` in model code or on a matrix
    product) and a layer built by an activation-class parameter (``activation=nn.ReLU``)
    are sites; an output Sigmoid held by an attribute and the forward of a custom
    autograd Function are not (issue 29). Fix: put the nonlinearity back between the layers. Check: compare train/val curves
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
        # A ReLU written as clamp(min=0) between two layers (issue 29: hand-written nets).
        Example(
            before="""
                import torch
                class TwoLayerNet(torch.nn.Module):
                    def forward(self, x):
                        h = self.linear1(x).clamp(min=0)
                        return self.linear2(h)
            """,
            after="""
                import torch
                class TwoLayerNet(torch.nn.Module):
                    def forward(self, x):
                        h = self.linear1(x)
                        return self.linear2(h)
            """,
        ),
        # A layer built by a constructor parameter that only ever gets activation classes
        # (issue 29: ``Model(activation=nn.Tanh)``).
        Example(
            before="""
                import torch.nn as nn
                class Model(nn.Module):
                    def __init__(self, activation=nn.ReLU):
                        super().__init__()
                        self.fc0 = nn.Linear(2, 5)
                        self.act0 = activation()
                        self.fc1 = nn.Linear(5, 1)

                    def forward(self, x):
                        x = self.act0(self.fc0(x))
                        return self.fc1(x)
                for activation in [nn.Tanh, nn.ReLU]:
                    model = Model(activation=activation)
            """,
            after="""
                import torch.nn as nn
                class Model(nn.Module):
                    def __init__(self, activation=nn.ReLU):
                        super().__init__()
                        self.fc0 = nn.Linear(2, 5)
                        self.act0 = activation()
                        self.fc1 = nn.Linear(5, 1)

                    def forward(self, x):
                        x = self.fc0(x)
                        return self.fc1(x)
                for activation in [nn.Tanh, nn.ReLU]:
                    model = Model(activation=activation)
            """,
        ),
    )
    non_examples = (
        # A custom autograd Function's forward: its backward still applies the mask.
        """
            import torch
            class MyReLU(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.clamp(min=0)
        """,
        # The output Sigmoid held by an attribute: an output activation (issue 29).
        """
            import torch.nn as nn
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.out = nn.Linear(5, 1)
                    self.act = nn.Sigmoid()

                def forward(self, x):
                    x = self.act(self.out(x))
                    return x
        """,
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
        if _in_autograd_function(node, ctx):
            return NonSite(
                "inside a custom autograd Function: its hand-written backward still applies "
                "the activation's gradient, so forward and backward would disagree"
            )
        if _relu_clamp(node, ctx):
            return _unless_factor(node, ctx) or {node: node.func.value}  # type: ignore[union-attr]
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
        if len(positional) == 1 and _built_by_activation_parameter(node.func, ctx, node):
            return {node: positional[0].value}
        return None
