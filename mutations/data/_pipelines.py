"""Which split an input pipeline serves (private to the data operators).

A normalisation written only for the test split (``transform_test = Compose([...,
Normalize(...)])``, ``test_x = raw[:2000] / 255.``) is evaluation code: removing it is the
train/test mismatch of ``skip_val_normalization``, not raw-scale training (issue 22).
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics import (
    bound_target,
    receiving_name,
    resolve,
    same_scope,
    split_role,
    split_role_of,
    values_of,
)

NORMALIZE_TRANSFORM = (
    "torchvision.transforms.Normalize",
    "torchvision.transforms.v2.Normalize",
    "torchvision.transforms.transforms.Normalize",
    # PyG: every node's features scaled to sum to 1 (issue 29).
    "torch_geometric.transforms.NormalizeFeatures",
)
# Transforms that put pixels on a model's scale: ``ToTensor`` maps 0..255 to 0..1.
_SCALING_TRANSFORMS = (
    *NORMALIZE_TRANSFORM,
    "torchvision.transforms.ToTensor",
    "torchvision.transforms.v2.ToTensor",
    "torchvision.transforms.transforms.ToTensor",
)


def transform_argument(node: cst.Call, ctx: Context) -> cst.Call | None:
    """The dataset call whose ``transform=`` this normalisation is, alone
    (``Planetoid(path, name, transform=T.NormalizeFeatures())``), else None."""
    arg = ctx.parent(node)
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
    if (
        isinstance(call, cst.Call)
        and arg.keyword is not None  # type: ignore[union-attr]
        and arg.keyword.value == "transform"  # type: ignore[union-attr]
        and resolve(node, ctx, strict=False).matches(NORMALIZE_TRANSFORM)
    ):
        return call
    return None


def transform_list(node: cst.Call, ctx: Context) -> cst.List | None:
    """The ``[...]`` of a ``Compose`` holding this ``Normalize(...)``, else None."""
    element = ctx.parent(node)
    holder = ctx.parent(element) if element is not None else None
    if (
        resolve(node, ctx, strict=False).matches(NORMALIZE_TRANSFORM)
        and isinstance(element, cst.Element)
        and isinstance(holder, cst.List)
    ):
        return holder
    return None


def named_transform_uses(node: cst.Call, ctx: Context) -> list[tuple[cst.List, cst.Element]] | None:
    """Where a ``Normalize(...)`` bound to a name (``normalize = transforms.Normalize(...)``)
    stands in ``Compose([...])`` lists: (list, element) per use, None when the call is not
    bound to a name or the name is also used otherwise (handed on, called): then no list
    edit removes it everywhere (issue 29: one ``normalize`` in two ``Compose`` lists)."""
    if not resolve(node, ctx, strict=False).matches(NORMALIZE_TRANSFORM):
        return None
    target = bound_target(node, ctx)
    if not isinstance(target, cst.Name):
        return None
    uses = []
    for name in ctx.nodes(cst.Name):
        if name is target or name.value != target.value or not same_scope(name, node, ctx):  # type: ignore[attr-defined]
            continue
        element, holder = ctx.parent(name), None
        if isinstance(element, cst.Attribute) and element.attr is name:
            continue  # ``x.normalize``: another name
        if isinstance(element, cst.Arg) and element.keyword is name:
            continue
        if isinstance(element, cst.Element):
            holder = ctx.parent(element)
        if not isinstance(holder, cst.List):
            return None
        uses.append((holder, element))
    return uses or None  # type: ignore[return-value]


def pipeline_role(node: cst.CSTNode, ctx: Context) -> str | None:
    """train/eval of the data a node prepares: the name it ends up in (``transform_test``,
    ``train_data``), else the data it reads, else the function it sits in
    (``def evaluate(x): (x - mu) / sd``)."""
    name = receiving_name(node, ctx)
    role = split_role(name) if name is not None else None
    role = role or split_role_of(node, ctx)
    if role is None:
        function = ctx.enclosing_function(node)
        role = split_role(function.name.value) if function is not None else None
    return role


def training_inputs_scaled(ctx: Context) -> bool:
    """Does a pipeline that is not for evaluation scale its inputs with a transform
    (``ToTensor()`` or ``Normalize`` for ``train_data``)?"""
    return any(
        resolve(call, ctx, strict=False).matches(_SCALING_TRANSFORMS)
        and pipeline_role(call, ctx) != "eval"
        for call in ctx.nodes(cst.Call)
    )


def named_transform_in(
    compose: cst.Call, ctx: Context
) -> tuple[cst.List, cst.Element, list[tuple[cst.List, cst.Element]]] | None:
    """(list, element, every use) when ``compose``'s ``[...]`` holds a name bound to a
    ``Normalize(...)`` (``Compose([transforms.ToTensor(), normalize])``)."""
    for arg in compose.args:
        if not isinstance(arg.value, cst.List):
            continue
        for element in arg.value.elements:
            if not isinstance(element.value, cst.Name):
                continue
            for value in values_of(element.value, ctx, element):
                uses = named_transform_uses(value, ctx) if isinstance(value, cst.Call) else None
                if uses is not None and any(e is element for _, e in uses):
                    return arg.value, element, uses  # type: ignore[return-value]
    return None
