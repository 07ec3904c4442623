"""Torch knowledge trainwreck-lint needs that the shared semantics layer does not hold yet.

libcst and mutator only (no experiments imports), written once so that it can be folded
into the semantics package next to the loss and optimizer recognisers it builds on.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mutator.context import Context, dotted_name
from mutator.patterns import log_softmax_input, method_name, optimizer_class, per_module

# Losses that apply softmax / sigmoid themselves and so expect raw logits (loss class names
# as ``patterns.loss_call_kind`` returns them, for the class and the functional form).
LOGITS_LOSSES = frozenset({"CrossEntropyLoss", "BCEWithLogitsLoss"})
# Optimizers that normalise the step by a running second moment: their useful learning
# rates are ~1e-4..3e-3, a hundred times below SGD's, and a tiny ``eps`` makes them explode.
ADAPTIVE_OPTIMIZERS = frozenset({"Adam", "AdamW", "NAdam", "RAdam", "Adamax", "Adagrad", "RMSprop"})


def adaptive_optimizer(call: cst.CSTNode, ctx: Context) -> str | None:
    """``"Adam"`` for ``optim.Adam(...)`` (any alias) when it is adaptive, else None."""
    name = optimizer_class(call, ctx)
    return name if name in ADAPTIVE_OPTIMIZERS else None


def reads_grad(expr: cst.CSTNode) -> bool:
    """Does ``expr`` read some tensor's ``.grad`` (``p.grad``, ``param.grad.data``)?"""
    return bool(m.findall(expr, m.Attribute(attr=m.Name("grad"))))


# In-place tensor methods a hand-written optimizer updates parameters with.
_UPDATE_METHODS = frozenset({"add_", "sub_", "addcdiv_", "addcmul_", "copy_"})


@per_module
def manual_updates(ctx: Context) -> list[cst.CSTNode]:
    """Parameter updates written by hand from gradients, the optimizer step of scripts that
    use none: ``p -= lr * p.grad``, ``p.data.add_(p.grad, alpha=-lr)``,
    ``p.data = p.data - lr * p.grad``."""
    found: list[cst.CSTNode] = []
    for node in ctx.nodes(cst.AugAssign):
        if reads_grad(node.value):  # type: ignore[attr-defined]
            found.append(node)
    for node in ctx.nodes(cst.Assign):
        targets = [dotted_name(t.target) or "" for t in node.targets]  # type: ignore[attr-defined]
        if any(t.endswith(".data") for t in targets) and reads_grad(node.value):  # type: ignore[attr-defined]
            found.append(node)
    for call in ctx.nodes(cst.Call):
        if method_name(call) in _UPDATE_METHODS and any(reads_grad(a.value) for a in call.args):  # type: ignore[attr-defined]
            found.append(call)
    return found


def step_closures(ctx: Context) -> set[str]:
    """Names of local functions handed to ``.step(...)`` as a closure (LBFGS): the step
    runs them, so their backward() has its optimizer step outside them."""
    names = set()
    for call in ctx.nodes(cst.Call):
        if method_name(call) == "step":  # type: ignore[arg-type]
            for arg in call.args:  # type: ignore[attr-defined]
                if isinstance(arg.value, cst.Name) and (
                    arg.keyword is None or arg.keyword.value == "closure"
                ):
                    names.add(arg.value.value)
    return names


def class_named(ctx: Context, name: str) -> cst.ClassDef | None:
    """The module-level-or-nested ``class <name>`` this module defines, if exactly one."""
    found = [c for c in ctx.nodes(cst.ClassDef) if c.name.value == name]  # type: ignore[attr-defined]
    return found[0] if len(found) == 1 else None  # type: ignore[return-value]


def forward_returns_log_probs(cls: cst.ClassDef, ctx: Context) -> bool | None:
    """Does the class's ``forward`` end in log-softmax (``return F.log_softmax(x, 1)``, a
    ``nn.LogSoftmax`` module, or a name assigned from one)? None when it has no ``forward``
    or returns nothing we can read."""
    forwards = [
        f
        for f in ctx.nodes_within(cls, cst.FunctionDef)
        if f.name.value == "forward" and ctx.enclosing(f, cst.ClassDef) is cls  # type: ignore[attr-defined]
    ]
    if len(forwards) != 1:
        return None
    returns = [r.value for r in ctx.nodes_within(forwards[0], cst.Return) if r.value is not None]  # type: ignore[attr-defined]
    if not returns:
        return None
    for value in returns:
        values = [value]
        if isinstance(value, cst.Name):
            values = [
                a.value  # type: ignore[attr-defined]
                for a in ctx.nodes_within(forwards[0], cst.Assign)
                if any(dotted_name(t.target) == value.value for t in a.targets)  # type: ignore[attr-defined]
            ] or values
        if not any(log_softmax_input(v, ctx) is not None for v in values):
            return False
    return True
