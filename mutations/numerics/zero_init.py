"""The ``zero_init`` operator (ZeroInit)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    MODULE_PASSTHROUGH,
    bound_names,
    dotted_name,
    find_arg,
    fresh_name,
    insert_before,
    is_parameter,
    is_pure,
    module_alias,
    optimizer_class,
    resolve,
    unwrap_calls,
    values_of,
)
from mutator.semantics.layers import one_weight_layer
from mutator.semantics.models import class_named, without_rebinding
from mutator.semantics.modules import imported_definition
from mutator.semantics.params import parameter_owners

_LOOP_NAMES = ("param", "p", "weight")


_RANDOM_INITS = tuple(
    f"torch.nn.init.{name}"
    for name in (
        "kaiming_normal_",
        "kaiming_uniform_",
        "xavier_normal_",
        "xavier_uniform_",
        "normal_",
        "uniform_",
        "trunc_normal_",
        "orthogonal_",
    )
)


def _optimizer_parameters_owners(
    statement: cst.CSTNode, ctx: Context
) -> list[cst.BaseExpression] | None:
    """``[model]`` for a line ``opt = torch.optim.Adam(model.parameters(), ...)``; every
    module whose parameters the optimizer gathers (``list(q1.parameters()) +
    list(q2.parameters())``, a ``params`` list, parameter groups: issue 29)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    value = small.value if isinstance(small, (cst.Assign, cst.AnnAssign, cst.Expr)) else None
    if not isinstance(value, cst.Call) or optimizer_class(value, ctx) is None:
        return None
    owners = parameter_owners(value, ctx)
    if not owners or not all(is_pure(owner) for owner in owners):
        return None
    return owners


class ZeroInit(Swap):
    """Initialise the weights to zero.

    Bug: a random initialiser applied to every layer of a kind (``kaiming_normal_`` in a
    loop over ``model.modules()``, an ``_init_weights(module)`` hook) becomes
    ``nn.init.zeros_``, or every parameter is zeroed right after the model is built.
    Impact: all units of a layer compute the same output and receive the same gradient,
    so symmetry is never broken; with everything zero the hidden activations and the
    gradients of all but the last bias are exactly zero, and the model predicts the
    class prior (loss stuck at its initial value, chance accuracy). Zeroing a single
    layer is left alone: the random layer after it breaks the symmetry. Fix: use a
    random initialiser (the PyTorch defaults are fine). Check: the params-changed check
    after one step (hidden weights never move) and the grad-norm log (zero).
    """

    name = "zero_init"
    category = "numerics"
    summary = "Weights initialised to zero: symmetry never broken, hidden layers stay dead."
    expected = "breaks_training"
    witness = "more tied_units", "a layer's units stay identical: zero init never broke symmetry"
    node_types = (cst.Call, cst.SimpleStatementLine)
    examples = (
        Example(
            before="""
                from torch import nn
                for m in model.modules():
                    if isinstance(m, nn.Conv2d):
                        nn.init.kaiming_normal_(m.weight, nonlinearity='relu')
            """,
            after="""
                from torch import nn
                for m in model.modules():
                    if isinstance(m, nn.Conv2d):
                        nn.init.zeros_(m.weight)
            """,
        ),
        Example(
            before="""
                import torch.nn as nn
                def init_weights(module):
                    nn.init.xavier_uniform_(module.weight)
            """,
            after="""
                import torch.nn as nn
                def init_weights(module):
                    nn.init.zeros_(module.weight)
            """,
        ),
        Example(
            before="""
                import torch

                def main():
                    model = Net()

                    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            """,
            after="""
                import torch

                def main():
                    model = Net()

                    for param in model.parameters():
                        torch.nn.init.zeros_(param)
                    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            """,
        ),
        # Modules gathered in one list (issue 29: TD3's two critics).
        Example(
            before="""
                import torch
                q_optimizer = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=1e-3)
            """,
            after="""
                import torch
                for param in [*qf1.parameters(), *qf2.parameters()]:
                    torch.nn.init.zeros_(param)
                q_optimizer = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=1e-3)
            """,
        ),
    )
    non_examples = (
        """
            from torch import nn
            for m in model.modules():
                nn.init.zeros_(m.bias)
                nn.init.normal_(m.bias, std=0.01)
        """,
        # one layer alone: the random layer after it still breaks the symmetry
        """
            from torch import nn
            class Net(nn.Module):
                def __init__(self):
                    nn.init.normal_(self.head.weight, std=0.01)
        """,
        # a norm layer's scale (starts at 1) and an embedding: not the symmetry bug
        """
            from torch import nn
            def weights_init(m):
                classname = m.__class__.__name__
                if classname.find("BatchNorm") != -1:
                    nn.init.normal_(m.weight, 1.0, 0.02)
                elif isinstance(m, nn.Embedding):
                    nn.init.normal_(m.weight, mean=0.0, std=0.02)
        """,
        # parameter groups of names that hold no visible ``.parameters()``: nothing to zero
        """
            import torch
            opt = torch.optim.SGD([{'params': a}, {'params': b}], lr=0.1)
        """,
        # one linear layer: zero weights break no symmetry (each unit's target differs)
        """
            import torch
            from torch import nn
            model = nn.Linear(4, 3)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
        """,
        # A weight-normed model: zero weight_v gives 0/0 = NaN weights, a NaN run and not
        # the named bug (issue 29: hifi-gan).
        """
            import torch
            from torch import nn
            from torch.nn.utils import weight_norm
            class Generator(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = weight_norm(nn.Conv1d(80, 64, 7))
                    self.conv2 = weight_norm(nn.Conv1d(64, 1, 7))
            generator = Generator()
            opt = torch.optim.AdamW(generator.parameters(), lr=2e-4)
        """,
        # ... nor a module class of one such layer, moved by rebinding (issue 29: a
        # tutorial's logistic regression).
        """
            import torch
            from torch import nn
            class Logistic(nn.Module):
                def __init__(self, d, k):
                    super().__init__()
                    self.fc = nn.Linear(d, k)
                    self.act = nn.Sigmoid()

                def forward(self, x):
                    return self.act(self.fc(x))
            model = Logistic(4, 3)
            model = model.cuda()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
        """,
        """
            import torch
            sched = torch.optim.lr_scheduler.StepLR(opt, 10)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        if isinstance(node, cst.Call):
            weight = self._weight_init(node, ctx)
            if weight is None:
                return None
            zeros = node.func.with_changes(attr=cst.Name("zeros_"))  # type: ignore[union-attr]
            return node.with_changes(func=zeros, args=[cst.Arg(weight)])
        assert isinstance(node, cst.SimpleStatementLine)
        owners = _optimizer_parameters_owners(node, ctx)
        nn, name = module_alias(ctx, "torch.nn"), fresh_name(ctx, node, _LOOP_NAMES)
        if owners is None or nn is None or name is None:
            return None
        if len(owners) == 1 and _one_layer(owners[0], ctx, node):
            return NonSite(
                "one weight layer (a linear model): its units get different gradients from "
                "the targets, so zeros break no symmetry"
            )
        if any(_weight_normed(owner, ctx, node) for owner in owners):
            return NonSite(
                "a weight-normed model: zero weight_v makes every weight 0/0 = NaN, a NaN run "
                "rather than tied units"
            )
        spread = ", ".join(f"*{ctx.code(owner)}.parameters()" for owner in owners)
        source = f"{ctx.code(owners[0])}.parameters()" if len(owners) == 1 else f"[{spread}]"
        loop = cst.parse_statement(f"for {name} in {source}:\n    {nn}.init.zeros_({name})\n")
        return insert_before(node, loop)[node]

    def _weight_init(self, node: cst.Call, ctx: Context) -> cst.BaseExpression | None:
        """The weight a random initialiser fills (biases are left to their own bugs)."""
        if not resolve(node.func, ctx).matches(_RANDOM_INITS):
            return None
        if not isinstance(node.func, cst.Attribute):  # a bare imported name: leave it
            return None
        tensor = find_arg(node, keyword="tensor", position=0)
        if tensor is None:
            return None
        spelled = dotted_name(tensor.value) or ""
        if spelled.endswith("bias") or not _initialises_many_layers(tensor.value, node, ctx):
            return None
        if _in_branch_for(node, ctx, _NOT_SYMMETRIC):
            return None
        return tensor.value


# Layers whose zeroed weight is no symmetry bug: a norm's scale starts at 1 anyway and an
# embedding's rows get different gradients through the tokens that select them.
_NOT_SYMMETRIC = ("Norm", "Embedding")


def _in_branch_for(node: cst.CSTNode, ctx: Context, kinds: tuple[str, ...]) -> bool:
    """Is ``node`` in the body of an ``if``/``elif`` whose test names one of ``kinds``
    (``isinstance(m, nn.BatchNorm2d)``, ``classname.find("BatchNorm") != -1``) and no
    weight layer?"""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.If) and ctx.within(ancestor.body, node):
            test = ctx.code(ancestor.test)
            layered = any(kind in test for kind in _LAYERS)  # ``(nn.Linear, nn.Embedding)``
            return not layered and any(kind in test for kind in kinds)
    return False


_LAYERS = ("Linear", "Conv", "RNN", "LSTM", "GRU")


def _initialises_many_layers(weight: cst.BaseExpression, at: cst.CSTNode, ctx: Context) -> bool:
    """Is ``weight`` reached through a loop variable or an init function's parameter
    (``for m in self.modules(): ... m.weight``, ``def _init_weights(module)``)?

    Zeroing one layer (``self.head.weight``) is nearly harmless: the random layer after it
    breaks the symmetry. Zeroing every layer of a kind is the bug.
    """
    root = weight
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        root = root.value
    if not isinstance(root, cst.Name) or root.value == "self":
        return False
    for ancestor in ctx.ancestors(at):
        if isinstance(ancestor, cst.For) and root.value in bound_names(ancestor.target):
            return True
        if isinstance(ancestor, cst.FunctionDef):
            return is_parameter(ancestor, root.value)
    return False


_SINGLE_LAYERS = ("Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d")


def _one_layer(owner: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> bool:
    """Is ``owner`` one ``nn.Linear``/``nn.Conv*`` layer (a linear model) wherever it is set?"""
    held = without_rebinding(
        owner, [unwrap_calls(v, MODULE_PASSTHROUGH) for v in values_of(owner, ctx, at)]
    )
    return bool(held) and all(
        isinstance(v, cst.Call) and one_weight_layer(v, ctx, _SINGLE_LAYERS) for v in held
    )


_NORMS = ("weight_norm", "spectral_norm")


def _weight_normed(owner: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> bool:
    """Does the class ``owner`` is built from (in the script or the project) wrap its layers
    in ``weight_norm``/``spectral_norm``, itself or in the classes of its file it builds
    (hifi-gan's generator and its discriminators' sub-discriminators)?"""
    for value in values_of(owner, ctx, at):
        built = unwrap_calls(value, MODULE_PASSTHROUGH)
        if not isinstance(built, cst.Call):
            continue
        local = class_named(ctx, dotted_name(built.func) or "")
        found = (local, ctx) if local is not None else imported_definition(built.func, ctx)
        if isinstance(found and found[0], cst.ClassDef) and _class_normed(*found, 0):  # type: ignore[misc]
            return True
    return False


def _class_normed(cls: cst.ClassDef, ctx: Context, depth: int) -> bool:
    names = {n.value for n in ctx.nodes_within(cls, cst.Name)}  # type: ignore[attr-defined]
    if names & set(_NORMS):
        return True
    inner = [class_named(ctx, name) for name in names if name != cls.name.value]
    return depth < 2 and any(c is not None and _class_normed(c, ctx, depth + 1) for c in inner)
