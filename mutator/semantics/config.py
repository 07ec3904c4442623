"""Hyperparameters held by config objects (issue 22): a class of settings (a ``tyro``
dataclass ``Args``: ``batch_size: int = 128``), a dict literal of settings (``{"batch_size":
2, "drop_rate": 0.1}``), an argparse default (``add_argument('--batch_size', default=80)``)
and a dotted assignment (``cfg.trainer.lr = 3e-4``). A setting counts only when the script
reads it back (``args.batch_size``, ``settings["batch_size"]``, ``cfg.trainer.lr``) or hands
the whole dict to a call (``GPTModel(GPT_CONFIG_124M)``: its keys are read there).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_module
from mutator.semantics.hyperparams import kind_of
from mutator.semantics.syntax import dotted_name, find_arg, method_name, number_value


@dataclass(frozen=True)
class Setting:
    """One config value: the node an operator rewrites, the number there, how it is read."""

    node: cst.CSTNode  # AnnAssign/Assign (a field), DictElement, or the add_argument Call
    value: cst.BaseExpression
    field: str  # the attribute, key or argparse destination the script reads


def _attributes_read(ctx: Context) -> set[str]:
    return {
        node.attr.value  # type: ignore[attr-defined]
        for node in ctx.nodes(cst.Attribute)
        if not isinstance(ctx.parent(node), cst.AssignTarget)
    }


def _keys_read(ctx: Context) -> set[str]:
    keys = set()
    for node in ctx.nodes(cst.SubscriptElement):
        index = node.slice  # type: ignore[attr-defined]
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            keys.add(str(index.value.evaluated_value))
    return keys


def _class_fields(ctx: Context, read: set[str]) -> list[Setting]:
    """Numeric fields of a class of settings; not one the script sets at run time
    (cleanrl's ``batch_size: int = 0`` filled by ``args.batch_size = ...``)."""
    written = {
        dotted.rsplit(".", 1)[-1]
        for assign in ctx.nodes(cst.AssignTarget)
        if (dotted := dotted_name(assign.target)) is not None and "." in dotted  # type: ignore[attr-defined]
    }
    found = []
    for cls in ctx.nodes(cst.ClassDef):
        for statement in cls.body.body:  # type: ignore[attr-defined]
            inner = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
            if isinstance(inner, cst.AnnAssign) and inner.value is not None:
                target, value = inner.target, inner.value
            elif isinstance(inner, cst.Assign) and len(inner.targets) == 1:
                target, value = inner.targets[0].target, inner.value
            else:
                continue
            if (
                isinstance(target, cst.Name)
                and target.value in read
                and target.value not in written
                and number_value(value) is not None
            ):
                found.append(Setting(inner, value, target.value))
    return found


def _handed_over(mapping: cst.CSTNode, ctx: Context) -> bool:
    """Is the dict (or the name it is bound to) passed whole to a call (``GPTModel(cfg)``),
    where code the script does not show reads its keys?"""
    parent = ctx.parent(mapping)
    if isinstance(parent, cst.Arg):
        return not parent.star
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
        return False
    name = dotted_name(parent.targets[0].target)
    return any(
        dotted_name(arg.value) == name and not arg.star  # type: ignore[attr-defined]
        for arg in ctx.nodes(cst.Arg)
    )  # ``DataLoader(ds, **kwargs)`` spells its keys as keywords: not a hidden read


def _dict_entries(ctx: Context, read: set[str]) -> list[Setting]:
    found = []
    for element in ctx.nodes(cst.DictElement):
        key = element.key  # type: ignore[attr-defined]
        if isinstance(key, cst.SimpleString) and number_value(element.value) is not None:  # type: ignore[attr-defined]
            name = str(key.evaluated_value)
            if name in read or _handed_over(ctx.parent(element), ctx):  # type: ignore[arg-type]
                found.append(Setting(element, element.value, name))  # type: ignore[attr-defined]
    return found


def _argparse_defaults(ctx: Context, read: set[str]) -> list[Setting]:
    found = []
    for call in ctx.nodes(cst.Call):
        if method_name(call) != "add_argument":  # type: ignore[arg-type]
            continue
        options = [
            str(arg.value.evaluated_value)  # type: ignore[attr-defined]
            for arg in call.args  # type: ignore[attr-defined]
            if arg.keyword is None and isinstance(arg.value, cst.SimpleString)
        ]
        long = [o for o in options if o.startswith("--")]
        dest = find_arg(call, "dest")  # type: ignore[arg-type]
        name = (
            str(dest.value.evaluated_value)  # type: ignore[attr-defined]
            if dest is not None and isinstance(dest.value, cst.SimpleString)
            else long[0][2:].replace("-", "_")
            if long
            else None
        )
        default = find_arg(call, "default")  # type: ignore[arg-type]
        if name in read and default is not None and number_value(default.value) is not None:
            found.append(Setting(call, default.value, name))  # type: ignore[arg-type]
    return found


def _dotted_assignments(ctx: Context, read: set[str]) -> list[Setting]:
    found = []
    for assign in ctx.nodes(cst.Assign):
        targets = assign.targets  # type: ignore[attr-defined]
        if len(targets) != 1 or not isinstance(targets[0].target, cst.Attribute):
            continue
        dotted = dotted_name(targets[0].target)
        if dotted is None or dotted.startswith("self."):
            continue  # a module's own attribute: no config object
        field = dotted.rsplit(".", 1)[-1]
        if number_value(assign.value) is None:  # type: ignore[attr-defined]
            continue
        if field in read or _object_handed_over(dotted, ctx):
            found.append(Setting(assign, assign.value, field))  # type: ignore[attr-defined]
    return found


def _object_handed_over(dotted: str, ctx: Context) -> bool:
    """Is the config object that holds ``dotted`` (``cfg.trainer.lr``) passed to a call,
    whole or the part holding it (``Trainer(model, cfg)``, ``Trainer(C.trainer, model)``)?"""
    parts = dotted.split(".")
    holders = {".".join(parts[:end]) for end in range(1, len(parts))}
    return any(
        not arg.star and dotted_name(arg.value) in holders  # type: ignore[attr-defined]
        for arg in ctx.nodes(cst.Arg)
    )


@per_module
def _settings(ctx: Context) -> dict[str, list[Setting]]:
    attributes, keys = _attributes_read(ctx), _keys_read(ctx)
    by_kind: dict[str, list[Setting]] = {}
    for setting in [
        *_class_fields(ctx, attributes),
        *_dict_entries(ctx, keys),
        *_argparse_defaults(ctx, attributes),
        *_dotted_assignments(ctx, attributes),
    ]:
        kind = kind_of(setting.field)
        if kind is not None:
            by_kind.setdefault(kind, []).append(setting)
    return by_kind


def config_settings(ctx: Context, kind: str) -> list[Setting]:
    """Config values of hyperparameter ``kind`` (``batch_size``, ``lr``, ``dropout``,
    ``weight_decay``) that the script reads back."""
    return _settings(ctx).get(kind, [])


def config_setting(node: cst.CSTNode, ctx: Context, kind: str) -> Setting | None:
    """The setting of ``kind`` whose rewritable node is ``node``, if any."""
    return next((s for s in config_settings(ctx, kind) if s.node is node), None)


def reads_field(root: cst.CSTNode, field: str, ctx: Context) -> bool:
    """Does code under ``root`` read the setting (``opt.batch_size``, ``cfg["batch_size"]``)?"""
    if any(a.attr.value == field for a in ctx.nodes_within(root, cst.Attribute)):  # type: ignore[attr-defined]
        return True
    return any(
        isinstance(e.slice, cst.Index)  # type: ignore[attr-defined]
        and isinstance(e.slice.value, cst.SimpleString)  # type: ignore[attr-defined]
        and e.slice.value.evaluated_value == field  # type: ignore[attr-defined]
        for e in ctx.nodes_within(root, cst.SubscriptElement)
    )


def with_setting_value(setting: Setting, value: cst.BaseExpression) -> cst.CSTNode:
    """The setting's node with ``value`` in place of its number."""
    node = setting.node
    if isinstance(node, cst.Call):
        return node.deep_replace(setting.value, value)  # type: ignore[return-value]
    return node.with_changes(value=value)
