"""Which split an input pipeline serves (private to the data operators).

A normalisation written only for the test split (``transform_test = Compose([...,
Normalize(...)])``, ``test_x = raw[:2000] / 255.``) is evaluation code: removing it is the
train/test mismatch of ``skip_val_normalization``, not raw-scale training (issue 22).
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics import (
    receiving_name,
    resolve,
    split_role,
    split_role_of,
)

NORMALIZE_TRANSFORM = (
    "torchvision.transforms.Normalize",
    "torchvision.transforms.v2.Normalize",
    "torchvision.transforms.transforms.Normalize",
)
# Transforms that put pixels on a model's scale: ``ToTensor`` maps 0..255 to 0..1.
_SCALING_TRANSFORMS = (
    *NORMALIZE_TRANSFORM,
    "torchvision.transforms.ToTensor",
    "torchvision.transforms.v2.ToTensor",
    "torchvision.transforms.transforms.ToTensor",
)


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
