"""Analyses the data operators share (private to this package)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Replacement
from mutator.semantics import (
    bound_target,
    code_of,
    compact_code,
    dotted_name,
    identifier_words,
    is_label_name,
    is_parameter,
    is_pure,
    module_alias,
    nodes_in_scope_of,
    number_value,
    reads_grad,
    resolve,
    split_role,
    split_role_of,
    values_of,
)
from mutator.semantics.schedules import lr_schedule_of

TENSOR_DATASET = ("torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset")


TENSOR_CONSTRUCTORS = ("torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor")


# Words naming the statistics of a standardization ``(x - mean) / std``.
STAT_WORDS = frozenset(
    {"mean", "std", "mu", "sigma", "var", "avg", "min", "max", "scale", "stdev", "center"}
)


# -- datasets and loaders ----------------------------------------------------------------


def is_tensor_dataset(node: cst.CSTNode, ctx: Context) -> bool:
    return isinstance(node, cst.Call) and resolve(node, ctx, strict=False).matches(TENSOR_DATASET)


def training_labels(call: cst.CSTNode, ctx: Context, custom: bool = True) -> cst.Arg | None:
    """The labels argument of a training ``TensorDataset(inputs, labels)``.

    With ``custom``, also of a ``Dataset`` class of the script whose ``__getitem__``
    returns ``(..., self.labels[idx])`` with ``self.labels`` set from that argument.
    """
    if not isinstance(call, cst.Call):
        return None
    args = call.args
    if len(args) < 2 or any(arg.keyword is not None or arg.star for arg in args):
        return None
    if is_tensor_dataset(call, ctx):
        # With three tensors (inputs, mask, labels? weights?) the labels are a guess.
        if len(args) != 2 or _forwarded_parameter(call, args[1].value, ctx):
            return None
        position = 1
    elif (forwarded := forwarded_label_position(call, ctx)) is not None:
        position = forwarded
    elif custom:
        position = custom_dataset_label_position(call, ctx)
        if position is None:
            return None
    else:
        return None
    if split_role_of(call, ctx) == "eval":
        return None
    return args[position]


def _forwarded_parameter(call: cst.Call, labels: cst.BaseExpression, ctx: Context) -> bool:
    """``def to_dataset(x, y): return TensorDataset(x, y)``: the labels are a parameter of a
    helper the script calls, for the training and the test split alike; the site is the
    call that passes the training labels."""
    function = ctx.enclosing_function(call)
    return (
        function is not None
        and isinstance(labels, cst.Name)
        and is_parameter(function, labels.value)
        and _dataset_helper(function.name.value, ctx) is function
    )


def _dataset_helper(name: str, ctx: Context) -> cst.FunctionDef | None:
    """The module-level function ``name`` when it returns ``TensorDataset(a, b)``."""
    found = [
        f
        for f in ctx.nodes(cst.FunctionDef)
        if f.name.value == name
        and ctx.enclosing_function(f) is None  # type: ignore[attr-defined]
        and ctx.enclosing(f, cst.ClassDef) is None
    ]
    if len(found) != 1:
        return None
    returns = [r.value for r in ctx.nodes_within(found[0], cst.Return)]  # type: ignore[attr-defined]
    return found[0] if any(is_tensor_dataset(value, ctx) for value in returns) else None  # type: ignore[return-value]


def forwarded_label_position(call: cst.Call, ctx: Context) -> int | None:
    """Which argument of a call of a dataset helper (``to_dataset(images, targets)``)
    becomes the labels of the ``TensorDataset`` it returns."""
    if not isinstance(call.func, cst.Name):
        return None
    helper = _dataset_helper(call.func.value, ctx)
    if helper is None:
        return None
    params = [p.name.value for p in helper.params.params]
    for returned in ctx.nodes_within(helper, cst.Return):
        value = returned.value  # type: ignore[attr-defined]
        if is_tensor_dataset(value, ctx) and len(value.args) == 2:
            labels = value.args[1].value
            if isinstance(labels, cst.Name) and labels.value in params:
                index = params.index(labels.value)
                return index if index < len(call.args) else None
    return None


def rewritable_labels(call: cst.CSTNode, ctx: Context) -> cst.Arg | None:
    """Training labels a rewrite may repeat and hand to ``torch`` (which the script binds)."""
    labels = training_labels(call, ctx)
    if labels is None or not is_pure(labels.value) or module_alias(ctx, "torch") is None:
        return None
    return labels


def custom_dataset_label_position(call: cst.Call, ctx: Context) -> int | None:
    """Which constructor argument of a script-defined dataset class holds the labels."""
    if not isinstance(call.func, cst.Name):
        return None
    classes = [c for c in ctx.nodes(cst.ClassDef) if c.name.value == call.func.value]
    if len(classes) != 1:
        return None
    methods = {
        m.name.value: m
        for m in ctx.nodes_within(classes[0], cst.FunctionDef)
        if ctx.enclosing(m, cst.ClassDef) is classes[0]
    }
    init, getitem = methods.get("__init__"), methods.get("__getitem__")
    if init is None or getitem is None:
        return None
    params = [p.name.value for p in init.params.params[1:]]
    if len(params) != len(call.args):
        return None
    label_attr = None
    for returned in ctx.nodes_within(getitem, cst.Return):
        values = returned.value
        if isinstance(values, cst.Tuple) and len(values.elements) >= 2:
            last = values.elements[-1].value
            if isinstance(last, cst.Subscript) and isinstance(last.value, cst.Attribute):
                label_attr = dotted_name(last.value)
    if label_attr is None:
        return None
    for assign in ctx.nodes_within(init, cst.Assign):
        for target in assign.targets:
            if dotted_name(target.target) == label_attr and isinstance(assign.value, cst.Name):
                name = assign.value.value
                return params.index(name) if name in params else None
    return None


# -- splits: ``B[:K]`` with its complement ``B[K:]`` ------------------------------------------


def single_slice(sub: cst.CSTNode) -> cst.Slice | None:
    if isinstance(sub, cst.Subscript) and len(sub.slice) == 1:
        element = sub.slice[0].slice
        if isinstance(element, cst.Slice) and element.step is None:
            return element
    return None


def head_bound(sub: cst.CSTNode) -> str | None:
    """``K`` of ``B[:K]``."""
    part = single_slice(sub)
    if part is None or part.lower is not None or part.upper is None:
        return None
    return compact_code(part.upper)


def tail_bound(sub: cst.CSTNode) -> str | None:
    """``K`` of ``B[K:]``, or of ``B[K:-n_test]`` in a three-way split."""
    part = single_slice(sub)
    if part is None or part.lower is None:
        return None
    return compact_code(part.lower)


def split_training_side(sub: cst.CSTNode, ctx: Context) -> list[cst.Subscript]:
    """The training slices of the split ``sub`` belongs to, in document order.

    A split is every pair ``B[:K]`` / ``B[K:]`` with the same ``K`` in one scope (``X`` and
    ``y`` split alike count as one split). The training side is the head unless ``K`` or
    the names the parts are bound to say otherwise (``perm[:n_val]`` is validation).
    """
    bound = head_bound(sub) or tail_bound(sub)
    # ``items[:1], items[1:]`` peels off a head item; a data split has a real size.
    if bound is None or (bound.lstrip("-").isdigit() and abs(int(bound)) < 2):
        return []
    heads, tails = [], []
    for candidate in nodes_in_scope_of(sub, ctx, cst.Subscript):
        if head_bound(candidate) == bound:
            heads.append(candidate)
        elif tail_bound(candidate) == bound:
            tails.append(candidate)
    paired = {compact_code(h.value) for h in heads} & {compact_code(t.value) for t in tails}
    heads = [h for h in heads if compact_code(h.value) in paired]
    tails = [t for t in tails if compact_code(t.value) in paired]
    if not heads:
        return []
    # Both parts mention ``K``; only the names they are bound to tell them apart.
    head_roles = {split_role(code_of(bound_target(h, ctx) or cst.Name("_"))) for h in heads}
    tail_roles = {split_role(code_of(bound_target(t, ctx) or cst.Name("_"))) for t in tails}
    if "eval" in head_roles or "train" in tail_roles:
        return tails
    if "train" in head_roles or "eval" in tail_roles:
        return heads
    # Unnamed parts: a bare size names its split (``perm[:n_val]`` is validation).
    return tails if bound.isidentifier() and split_role(bound) == "eval" else heads


# Words of a sequence that holds names, not samples (``metric_names[:2]``, ``columns[1:]``).
_NAME_WORDS = frozenset({"name", "names", "key", "keys", "column", "columns", "cols", "metric"})
_NAME_WORDS |= frozenset({"metrics", "header", "headers", "field", "fields", "title", "titles"})


def not_a_data_split(sub: cst.Subscript, ctx: Context) -> str | None:
    """Why a split-shaped slice cuts no data: the sequence holds names or other strings
    (issue 29: ``metric_names[:k]`` read as the training split)."""
    base = sub.value
    if identifier_words(code_of(base)) & _NAME_WORDS:
        return f"`{code_of(base)}` holds names, not samples"
    values = values_of(base, ctx, sub) if isinstance(base, cst.Name) else []
    for value in values:
        strings = isinstance(value, (cst.List, cst.Tuple)) and value.elements
        if strings and all(isinstance(e.value, cst.SimpleString) for e in value.elements):
            return f"`{code_of(base)}` is a list of strings, not samples"
    return None


# -- standardization: ``(A - mean) / std`` and ``A / 255`` ---------------------------------


def normalized_operand(node: cst.CSTNode, ctx: Context) -> tuple[cst.BaseExpression, str] | None:
    """For a normalizing division, the raw operand and a key naming its statistics."""
    if not isinstance(node, cst.BinaryOperation) or not isinstance(node.operator, cst.Divide):
        return None
    left = node.left
    if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Subtract):
        stats = f"{compact_code(left.right)}|{compact_code(node.right)}"
        # ``max(1, total - warmup)`` is arithmetic, not a statistic named max.
        named = re.sub(r"(?<![\w.])(max|min|abs|len|float|int)\(", "(", stats)
        if left.lpar and identifier_words(named) & STAT_WORDS:
            return left.left, stats
        return None
    divisor = number_value(node.right)
    if divisor is None or divisor < 2:
        return None
    # Pixel scaling: ``x / 255``, or any constant applied where raw data becomes a tensor.
    if divisor == 255 or (
        isinstance(left, cst.Call) and resolve(left, ctx, strict=False).matches(TENSOR_CONSTRUCTORS)
    ):
        return left, f"/{divisor:g}"
    return None


def input_normalization(node: cst.CSTNode, ctx: Context) -> tuple[cst.BaseExpression, str] | None:
    """``normalized_operand`` for inputs only: standardized regression targets are labels."""
    found = normalized_operand(node, ctx)
    if found is None or is_label_name(code_of(found[0])):
        return None
    return found


# Words of values that are measurements of training, not inputs of a model.
_METRIC_WORDS = frozenset({"loss", "losses", "acc", "accuracy", "metric", "metrics", "score"})
_METRIC_WORDS |= frozenset({"grad", "grads", "gradient", "gradients"})


def not_input_statistics(node: cst.CSTNode, ctx: Context) -> str | None:
    """Why a normalising division is no standardisation of a model's inputs: it sits in a
    learning-rate schedule (``(step - warmup) / (max_steps - warmup)``), or its operand is a
    metric or a gradient (``(loss - mean) / std`` for spike detection, issue 29)."""
    schedule = lr_schedule_of(node, ctx)
    if schedule is not None:
        return f"inside the learning-rate schedule `{schedule}`: a step count, not a model input"
    found = normalized_operand(node, ctx)
    if found is None:
        return None
    operand = found[0]
    if reads_grad(operand) or identifier_words(code_of(operand)) & _METRIC_WORDS:
        return f"`{code_of(operand)}` is a metric or a gradient, not a model input"
    return None


def normalization_group(node: cst.CSTNode, ctx: Context) -> list[cst.BinaryOperation]:
    """All input normalizations with the statistics of ``node``, in document order."""
    found = input_normalization(node, ctx)
    if found is None:
        return []
    key = found[1]
    return [
        other
        for other in ctx.nodes(cst.BinaryOperation)
        if (match := input_normalization(other, ctx)) is not None and match[1] == key
    ]


def unwrapped(node: cst.BinaryOperation, operand: cst.BaseExpression) -> cst.BaseExpression:
    """``operand`` in place of ``node``, keeping the parentheses the place needs."""
    if node.lpar and not getattr(operand, "lpar", ()):
        return operand.with_changes(lpar=node.lpar, rpar=node.rpar)
    return operand


def drop_normalizations(members: Sequence[cst.BinaryOperation], ctx: Context) -> Edits:
    """Edits undoing ``members``; a line reduced to ``x = x`` is deleted instead."""
    edits: dict[cst.CSTNode, Replacement] = {}
    by_statement: dict[int, list[cst.BinaryOperation]] = {}
    statements: dict[int, cst.CSTNode] = {}
    for member in members:
        statement = ctx.statement_of(member)
        by_statement.setdefault(id(statement), []).append(member)
        statements[id(statement)] = statement
    for key, in_statement in by_statement.items():
        statement = statements[key]
        replacements = {id(m): unwrapped(m, normalized_operand(m, ctx)[0]) for m in in_statement}
        if becomes_self_assignment(statement, replacements):
            edits[statement] = cst.RemoveFromParent()
        else:
            for member in in_statement:
                edits[member] = replacements[id(member)]
    return edits


def becomes_self_assignment(statement: cst.CSTNode, replacements: dict[int, cst.CSTNode]) -> bool:
    if not (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Assign)
        and len(statement.body[0].targets) == 1
    ):
        return False
    assign = statement.body[0]
    value = assign.value
    if id(value) in replacements:
        new_value = replacements[id(value)]
    elif isinstance(value, cst.Tuple) and all(id(e.value) in replacements for e in value.elements):
        new_value = value.with_changes(
            elements=[e.with_changes(value=replacements[id(e.value)]) for e in value.elements]
        )
    else:
        return False
    return compact_code(new_value).strip("()") == compact_code(assign.targets[0].target).strip("()")
