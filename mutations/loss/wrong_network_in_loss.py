"""The ``wrong_network_in_loss`` operator (WrongNetworkInLoss)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._loss_flow import feeds_loss
from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    MODULE_PASSTHROUGH,
    TRAINING_CONTEXTS,
    code_of,
    dotted_name,
    is_model,
    loops_around,
    parse_expr,
    per_module,
    resolve,
    single_assignment,
    starts_before,
    unwrap_calls,
)


def _pairs(assign: cst.Assign) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(target, value) pairs of ``a = A()`` and ``a, b = A(), B()``."""
    pairs = []
    for target in assign.targets:
        bound = target.target
        if isinstance(bound, (cst.Tuple, cst.List)) and isinstance(assign.value, cst.Tuple):
            if len(bound.elements) == len(assign.value.elements):
                pairs += [(t.value, v.value) for t, v in zip(bound.elements, assign.value.elements)]
        else:
            pairs.append((bound, assign.value))
    return pairs


def _network_constructor(value: cst.BaseExpression, ctx: Context) -> bool:
    """``MultiDiscriminator()``, ``QNet(env)``: a model class, not a torch.nn layer (two
    ``nn.Linear`` heads are layers of one network) nor a method (``D.cuda()``)."""
    if not isinstance(value, cst.Call) or not is_model(value, ctx):
        return False
    if not (dotted_name(value.func) or "").rsplit(".", 1)[-1][:1].isupper():
        return False  # ``generator(z)``: a model's output, not a network built by a class
    if isinstance(value.func, cst.Attribute) and is_model(value.func.value, ctx):
        return False
    return not resolve(value.func, ctx).under("torch.nn")


@per_module
def _constructed(ctx: Context) -> dict[str, list[str]]:
    """Constructor code (``MultiDiscriminator``) -> the names bound to its calls, in order."""
    found: dict[str, list[str]] = {}
    for assign in ctx.nodes(cst.Assign):
        for target, value in _pairs(assign):  # type: ignore[arg-type]
            name = dotted_name(target)
            value = unwrap_calls(value, MODULE_PASSTHROUGH)  # ``QNet(env).to(device)``
            if name is None or not _network_constructor(value, ctx):
                continue
            names = found.setdefault(code_of(value.func), [])  # type: ignore[attr-defined]
            if name not in names:
                names.append(name)
    return found


def _sibling(model: str, ctx: Context) -> str | None:
    """Another network built by the same constructor as ``model`` (the first one)."""
    for names in _constructed(ctx).values():
        if model in names:
            others = [name for name in names if name != model]
            return others[0] if others else None
    return None


def _networks(value: cst.BaseExpression, ctx: Context) -> list[str]:
    """The networks ``value`` runs, in order: ``D(x)`` and ``D.compute_loss(x)``."""
    found = []
    for call in ctx.nodes_within(value, cst.Call):
        func = call.func  # type: ignore[attr-defined]
        owner = func.value if isinstance(func, cst.Attribute) else None
        for candidate in (func, owner):
            name = dotted_name(candidate) if candidate is not None else None
            if name is not None and name not in found and _sibling(name, ctx) is not None:
                found.append(name)
                break
    return found


def _built_later(name: str, at: cst.CSTNode, ctx: Context) -> bool:
    """Is every binding of ``name`` a later line of ``at``'s own scope, outside any loop
    around ``at`` (a reloaded copy built after training; issue 29)?"""
    scope = ctx.enclosing_function(at)
    bindings = [
        a
        for a in ctx.nodes(cst.Assign)
        if any(dotted_name(t) == name for t, _ in _pairs(a))  # type: ignore[arg-type]
    ]
    loops = loops_around(at, ctx)
    return bool(bindings) and all(
        ctx.enclosing_function(a) is scope
        and starts_before(at, a, ctx)
        and not any(ctx.within(loop, a) for loop in loops)
        for a in bindings
    )


class _Rename(cst.CSTTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return (
            parse_expr(self.new) if "." not in self.old and original.value == self.old else updated
        )

    def leave_Attribute(
        self, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression:
        return parse_expr(self.new) if dotted_name(original) == self.old else updated


class WrongNetworkInLoss(Swap):
    """Compute a loss with another network built like the intended one.

    Bug: a script that trains several networks of one class (two discriminators, twin Q
    networks, an online and a target network) computes a loss with the wrong one, usually a
    copy-pasted line. Real fix: eriklindernoren/PyTorch-GAN@b2c1838 (BicycleGAN's cLR
    discriminator loss was computed with the cVAE discriminator ``D_VAE``, so ``D_LR``
    never learned). Impact: the network the loss was meant for gets no gradient from it
    (its optimizer steps on nothing), the other one gets an extra objective; GAN training
    loses one of its adversaries, twin-Q learning collapses to one critic, a TD target
    comes from the online network. The run goes on with plausible losses. Fix: use the
    network the loss belongs to (name networks and their losses alike). Check: after
    each ``backward()`` the network whose optimizer steps next must have non-zero
    gradients; log one gradient norm per network.
    """

    name = "wrong_network_in_loss"
    category = "loss"
    summary = "A loss computed with a sibling network of the same class (D_VAE for D_LR)."
    expected = "degrades"
    witness = "differs forward_order", "a loss's forward runs the sibling network, not its own"
    node_types = (cst.SimpleStatementLine,)
    contexts = TRAINING_CONTEXTS
    examples = (
        Example(
            before="""
                D_A = Discriminator()
                D_B = Discriminator()
                loss_D_B = D_B.compute_loss(real_B, valid) + D_B.compute_loss(fake_B.detach(), fake)
                loss_D_B.backward()
            """,
            after="""
                D_A = Discriminator()
                D_B = Discriminator()
                loss_D_B = D_A.compute_loss(real_B, valid) + D_A.compute_loss(fake_B.detach(), fake)
                loss_D_B.backward()
            """,
        ),
        Example(
            before="""
                class Agent:
                    def __init__(self):
                        self.q1 = QNet()
                        self.q2 = QNet()

                    def update(self, s, a, target):
                        loss = F.mse_loss(self.q1(s, a), target)
                        loss.backward()
            """,
            after="""
                class Agent:
                    def __init__(self):
                        self.q1 = QNet()
                        self.q2 = QNet()

                    def update(self, s, a, target):
                        loss = F.mse_loss(self.q2(s, a), target)
                        loss.backward()
            """,
        ),
    )
    non_examples = (
        # The other network is built only after training (a reloaded copy): NameError.
        """
            import torch.nn as nn
            class Net(nn.Module):
                pass
            model = Net()
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
            newmodel = Net()
        """,
        # One network of its class: nothing to confuse it with.
        """
            G = Generator()
            D = Discriminator()
            loss_D = criterion(D(real), ones)
            loss_D.backward()
        """,
        # Not part of the backwarded loss (a logged score).
        """
            D_A = Discriminator()
            D_B = Discriminator()
            score = D_B(real_B).mean().item()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        assign = single_assignment(node)
        if assign is None or not feeds_loss(node, ctx):
            return None
        bound = {dotted_name(t.target) for t in assign.targets}
        networks = {n for names in _constructed(ctx).values() for n in names}
        if bound & networks:
            return None  # ``D = D.cuda()``: the network itself, not a loss
        for network in _networks(assign.value, ctx):
            sibling = _sibling(network, ctx)
            if sibling is not None and _built_later(sibling, node, ctx):
                return NonSite(
                    f"`{sibling}` is built only after this line: the mutant raises NameError"
                )
            if sibling is not None:
                value = assign.value.visit(_Rename(network, sibling))
                return node.with_changes(body=[assign.with_changes(value=value)])  # type: ignore[attr-defined]
        return None
