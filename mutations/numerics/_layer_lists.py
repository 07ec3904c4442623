"""Activations a block helper puts into its list of layers (private to the numerics package;
issue 29: the GAN zoo's ``layers.append(nn.LeakyReLU(0.2))``)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits
from mutator.semantics import method_name, resolve, without_list_element


def in_layer_list(node: cst.Call, ctx: Context) -> Edits | None:
    """An activation a block helper puts into its list of layers (issue 29: the GAN zoo's
    ``layers.append(nn.LeakyReLU(0.2))``, ``block = [nn.Conv2d(...), nn.LeakyReLU(0.2),
    ...]``): out of the list, the layers around it meet with nothing between."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.Arg):  # ``layers.append(nn.ReLU())`` on a line of its own
        call = ctx.parent(parent)
        line = ctx.parent(ctx.parent(call)) if call is not None else None
        if (
            isinstance(call, cst.Call)
            and method_name(call) == "append"
            and isinstance(call.func.value, cst.Name)  # type: ignore[union-attr]
            and isinstance(ctx.parent(call), cst.Expr)
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
        ):
            return {line: cst.RemoveFromParent()}
        return None
    holder = ctx.parent(parent) if isinstance(parent, cst.Element) else None
    if not isinstance(holder, cst.List) or len(holder.elements) < 2:
        return None
    if not any(_is_layer_constructor(e.value, ctx) for e in holder.elements if e.value is not node):
        return None
    return {holder: without_list_element(holder, node)}


def _is_layer_constructor(value: cst.BaseExpression, ctx: Context) -> bool:
    names = resolve(value, ctx).names if isinstance(value, cst.Call) else frozenset()
    return any(n.startswith("torch.nn.") and n.rsplit(".", 1)[-1][:1].isupper() for n in names)
