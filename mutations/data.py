"""Data bugs: labels that stop matching their inputs, leaking splits, lost preprocessing.

The private helpers at the top recognise the data-pipeline idioms only these operators
need: where the labels of a ``TensorDataset`` are, which side of a split is the training
one, which expressions standardize inputs, next-token slices, flattening. Train/eval
roles of names and DataLoaders are ``mutator.semantics`` recognisers.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Operator, Param, Replacement
from mutator.semantics import (
    as_receiver,
    bound_target,
    closed_args,
    code_of,
    compact_code,
    dotted_name,
    find_arg,
    has_class_index_loss,
    identifier_words,
    is_data_loader,
    is_label_name,
    is_pure,
    is_training_loader,
    loader_role,
    method_name,
    module_alias,
    nodes_in_scope_of,
    number_value,
    parse_expr,
    resolve,
    shuffle_true,
    split_role,
    split_role_of,
    starts_before,
    unpacked_values,
    values_bound_by,
    variables_read,
    with_arg_value,
    without_list_element,
)

_TENSOR_DATASET = ("torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset")
_NORMALIZE_TRANSFORM = (
    "torchvision.transforms.Normalize",
    "torchvision.transforms.v2.Normalize",
    "torchvision.transforms.transforms.Normalize",
)
_TENSOR_CONSTRUCTORS = ("torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor")

# Words naming the statistics of a standardization ``(x - mean) / std``.
_STAT_WORDS = frozenset(
    {"mean", "std", "mu", "sigma", "var", "avg", "min", "max", "scale", "stdev", "center"}
)
_STAT_METHODS = frozenset({"mean", "std", "var", "min", "max", "amin", "amax"})
_INT_HINTS = ("torch.long", "torch.int", ".long()", "LongTensor", "randint", "argmax", "int64")
_FLOAT_HINTS = ("torch.float", ".float()", "float32", "float64", "FloatTensor", "torch.double")


# -- labels: class indices or values? ------------------------------------------------------


def _label_kind(labels: cst.BaseExpression, ctx: Context) -> str | None:
    """ "int" or "float" from the dtype evidence nearest to ``labels`` along its definitions."""
    level, seen = [labels], set()
    for _ in range(4):
        texts = [code_of(expr) for expr in level]
        if any(hint in text for text in texts for hint in _FLOAT_HINTS):
            return "float"
        if any(hint in text for text in texts for hint in _INT_HINTS):
            return "int"
        following = []
        for expr in level:
            for name in variables_read(expr, ctx):
                if name not in seen:
                    seen.add(name)
                    following.extend(unpacked_values(ctx, name))
        level = following
    # No dtype on the way: a classification loss says the labels are class indices.
    return "int" if has_class_index_loss(ctx) else None


# -- datasets and loaders ----------------------------------------------------------------


def _is_tensor_dataset(node: cst.CSTNode, ctx: Context) -> bool:
    return isinstance(node, cst.Call) and resolve(node, ctx, strict=False).matches(_TENSOR_DATASET)


def _training_labels(call: cst.CSTNode, ctx: Context, custom: bool = True) -> cst.Arg | None:
    """The labels argument of a training ``TensorDataset(inputs, labels)``.

    With ``custom``, also of a ``Dataset`` class of the script whose ``__getitem__``
    returns ``(..., self.labels[idx])`` with ``self.labels`` set from that argument.
    """
    if not isinstance(call, cst.Call):
        return None
    args = call.args
    if len(args) < 2 or any(arg.keyword is not None or arg.star for arg in args):
        return None
    if _is_tensor_dataset(call, ctx):
        # With three tensors (inputs, mask, labels? weights?) the labels are a guess.
        if len(args) != 2:
            return None
        position = 1
    elif custom:
        position = _custom_dataset_label_position(call, ctx)
        if position is None:
            return None
    else:
        return None
    if split_role_of(call, ctx) == "eval":
        return None
    return args[position]


def _rewritable_labels(call: cst.CSTNode, ctx: Context) -> cst.Arg | None:
    """Training labels a rewrite may repeat and hand to ``torch`` (which the script binds)."""
    labels = _training_labels(call, ctx)
    if labels is None or not is_pure(labels.value) or module_alias(ctx, "torch") is None:
        return None
    return labels


def _custom_dataset_label_position(call: cst.Call, ctx: Context) -> int | None:
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


def _dataset_arg(loader: cst.Call) -> cst.Arg | None:
    return find_arg(loader, keyword="dataset", position=0)


# -- splits: ``B[:K]`` with its complement ``B[K:]`` ------------------------------------------


def _single_slice(sub: cst.CSTNode) -> cst.Slice | None:
    if isinstance(sub, cst.Subscript) and len(sub.slice) == 1:
        element = sub.slice[0].slice
        if isinstance(element, cst.Slice) and element.step is None:
            return element
    return None


def _head_bound(sub: cst.CSTNode) -> str | None:
    """``K`` of ``B[:K]``."""
    part = _single_slice(sub)
    if part is None or part.lower is not None or part.upper is None:
        return None
    return compact_code(part.upper)


def _tail_bound(sub: cst.CSTNode) -> str | None:
    """``K`` of ``B[K:]``, or of ``B[K:-n_test]`` in a three-way split."""
    part = _single_slice(sub)
    if part is None or part.lower is None:
        return None
    return compact_code(part.lower)


def _split_training_side(sub: cst.CSTNode, ctx: Context) -> list[cst.Subscript]:
    """The training slices of the split ``sub`` belongs to, in document order.

    A split is every pair ``B[:K]`` / ``B[K:]`` with the same ``K`` in one scope (``X`` and
    ``y`` split alike count as one split). The training side is the head unless ``K`` or
    the names the parts are bound to say otherwise (``perm[:n_val]`` is validation).
    """
    bound = _head_bound(sub) or _tail_bound(sub)
    # ``items[:1], items[1:]`` peels off a head item; a data split has a real size.
    if bound is None or (bound.lstrip("-").isdigit() and abs(int(bound)) < 2):
        return []
    heads, tails = [], []
    for candidate in nodes_in_scope_of(sub, ctx, cst.Subscript):
        if _head_bound(candidate) == bound:
            heads.append(candidate)
        elif _tail_bound(candidate) == bound:
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


# -- standardization: ``(A - mean) / std`` and ``A / 255`` ---------------------------------


def _normalized_operand(node: cst.CSTNode, ctx: Context) -> tuple[cst.BaseExpression, str] | None:
    """For a normalizing division, the raw operand and a key naming its statistics."""
    if not isinstance(node, cst.BinaryOperation) or not isinstance(node.operator, cst.Divide):
        return None
    left = node.left
    if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Subtract):
        stats = f"{compact_code(left.right)}|{compact_code(node.right)}"
        # ``max(1, total - warmup)`` is arithmetic, not a statistic named max.
        named = re.sub(r"(?<![\w.])(max|min|abs|len|float|int)\(", "(", stats)
        if left.lpar and identifier_words(named) & _STAT_WORDS:
            return left.left, stats
        return None
    divisor = number_value(node.right)
    if divisor is None or divisor < 2:
        return None
    # Pixel scaling: ``x / 255``, or any constant applied where raw data becomes a tensor.
    if divisor == 255 or (
        isinstance(left, cst.Call)
        and resolve(left, ctx, strict=False).matches(_TENSOR_CONSTRUCTORS)
    ):
        return left, f"/{divisor:g}"
    return None


def _input_normalization(node: cst.CSTNode, ctx: Context) -> tuple[cst.BaseExpression, str] | None:
    """``_normalized_operand`` for inputs only: standardized regression targets are labels."""
    found = _normalized_operand(node, ctx)
    if found is None or is_label_name(code_of(found[0])):
        return None
    return found


def _normalization_group(node: cst.CSTNode, ctx: Context) -> list[cst.BinaryOperation]:
    """All input normalizations with the statistics of ``node``, in document order."""
    found = _input_normalization(node, ctx)
    if found is None:
        return []
    key = found[1]
    return [
        other
        for other in ctx.nodes(cst.BinaryOperation)
        if (match := _input_normalization(other, ctx)) is not None and match[1] == key
    ]


def _normalization_role(node: cst.BinaryOperation, ctx: Context) -> str | None:
    """From the data, its target, else the function: ``def evaluate(x): (x - mu) / sd``."""
    role = split_role_of(node, ctx)
    if role is None:
        function = ctx.enclosing_function(node)
        role = split_role(function.name.value) if function is not None else None
    return role


def _unwrapped(node: cst.BinaryOperation, operand: cst.BaseExpression) -> cst.BaseExpression:
    """``operand`` in place of ``node``, keeping the parentheses the place needs."""
    if node.lpar and not getattr(operand, "lpar", ()):
        return operand.with_changes(lpar=node.lpar, rpar=node.rpar)
    return operand


def _drop_normalizations(
    members: Sequence[cst.BinaryOperation], ctx: Context
) -> dict[cst.CSTNode, Replacement]:
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
        replacements = {id(m): _unwrapped(m, _normalized_operand(m, ctx)[0]) for m in in_statement}
        if _becomes_self_assignment(statement, replacements):
            edits[statement] = cst.RemoveFromParent()
        else:
            for member in in_statement:
                edits[member] = replacements[id(member)]
    return edits


def _becomes_self_assignment(statement: cst.CSTNode, replacements: dict[int, cst.CSTNode]) -> bool:
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


# -- language-model slices: ``seq[i:i + T]`` and ``seq[i + 1:i + T + 1]`` -----------------------


def _bound_offset(expr: cst.BaseExpression | None, upper: bool) -> tuple[tuple, int]:
    """A slice bound as (symbolic terms, integer offset).

    ``i + 1 + T`` and ``i + T + 1`` both give ((("T", 1), ("i", 1)), 1); an omitted upper
    bound is the symbol ``<end>`` and a negative constant counts from it.
    """
    if expr is None:
        return ((("<end>", 1),) if upper else ()), 0
    terms: Counter[str] = Counter()
    constant = _collect_terms(expr, 1, terms)
    if upper and constant < 0 and not terms:
        # Negative indexes count from the end, so ``:-1`` is one before ``:``.
        terms["<end>"] = 1
    return tuple(sorted((t, c) for t, c in terms.items() if c)), constant


def _collect_terms(expr: cst.BaseExpression, sign: int, terms: Counter[str]) -> int:
    """Add the symbolic terms of a sum to ``terms``; return its integer constant."""
    value = number_value(expr)
    if value is not None and value == int(value):
        return sign * int(value)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        right_sign = sign if isinstance(expr.operator, cst.Add) else -sign
        return _collect_terms(expr.left, sign, terms) + _collect_terms(
            expr.right, right_sign, terms
        )
    terms[compact_code(expr)] += sign
    return 0


def _describe_index(sub: cst.Subscript) -> list[tuple] | None:
    described = []
    for element in sub.slice:
        part = element.slice
        if isinstance(part, cst.Index):
            described.append(("index", compact_code(part.value)))
        elif part.step is None:
            described.append(
                ("slice", _bound_offset(part.lower, False), _bound_offset(part.upper, True))
            )
        else:
            return None
    return described


def _is_shifted_copy(target: cst.Subscript, source: cst.Subscript) -> bool:
    """Is ``target`` the same slice as ``source`` moved one position to the right?"""
    if compact_code(target.value) != compact_code(source.value):
        return False
    shifted, original = _describe_index(target), _describe_index(source)
    if shifted is None or original is None or len(shifted) != len(original):
        return False
    differing = [(s, o) for s, o in zip(shifted, original) if s != o]
    if len(differing) != 1:
        return False
    (kind_s, *bounds_s), (kind_o, *bounds_o) = differing[0]
    if kind_s != "slice" or kind_o != "slice":
        return False
    return all(s[0] == o[0] and s[1] == o[1] + 1 for s, o in zip(bounds_s, bounds_o))


def _unshifted_source(node: cst.CSTNode, ctx: Context) -> cst.Subscript | None:
    """For a next-token target slice, the input slice it is shifted from."""
    if not isinstance(node, cst.Subscript):
        return None
    parent = ctx.parent(node)
    for candidate in nodes_in_scope_of(node, ctx, cst.Subscript):
        if candidate is node or not _is_shifted_copy(node, candidate):
            continue
        # ``t[1:] - t[:-1]`` is a finite difference, not a target.
        if isinstance(parent, cst.BinaryOperation) and (
            candidate is parent.left or candidate is parent.right
        ):
            continue
        return candidate
    return None


# -- flattening: ``x.view(x.size(0), -1)`` ----------------------------------------------------


def _is_minus_one(expr: cst.BaseExpression) -> bool:
    return number_value(expr) == -1


def _is_batch_size(expr: cst.BaseExpression) -> bool:
    """``t.size(0)``, ``t.shape[0]``, ``len(t)`` or a name such as ``B`` / ``batch_size``."""
    if isinstance(expr, cst.Call):
        if method_name(expr) == "size" and len(expr.args) == 1:
            return number_value(expr.args[0].value) == 0
        return isinstance(expr.func, cst.Name) and expr.func.value == "len"
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute):
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        return (
            expr.value.attr.value == "shape"
            and isinstance(index, cst.Index)
            and number_value(index.value) == 0
        )
    return isinstance(expr, cst.Name) and expr.value in {"B", "N", "bs", "batch_size", "n_batch"}


def _is_last_dim(expr: cst.BaseExpression) -> bool:
    """``t.size(-1)`` or ``t.shape[-1]``: the feature/class dimension kept by a merge."""
    if isinstance(expr, cst.Call) and method_name(expr) == "size" and len(expr.args) == 1:
        return number_value(expr.args[0].value) == -1
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute):
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        return (
            expr.value.attr.value == "shape"
            and isinstance(index, cst.Index)
            and number_value(index.value) == -1
        )
    return False


def _is_time_merge(expr: cst.BaseExpression) -> bool:
    """``B * T``: batch and time merged into one dimension (nanoGPT's ``view(B * T, C)``)."""
    return (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Multiply)
        and isinstance(expr.left, cst.Name)
        and isinstance(expr.right, cst.Name)
    )


def _is_constant_size(expr: cst.BaseExpression) -> bool:
    """``784``, ``28 * 28``, ``32 * 2 * 2``: a per-sample feature count."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return _is_constant_size(expr.left) and _is_constant_size(expr.right)
    return isinstance(expr, cst.Integer) and int(expr.value) >= 2


# -- the operators -----------------------------------------------------------------------------


class ShiftLabels(Operator):
    """Misalign labels and inputs by one sample.

    Bug: the label of sample ``i`` is paired with the input of sample ``i - 1``, the
    classic off-by-one in a custom ``Dataset.__getitem__`` or in code that aligns inputs
    and targets by hand. Impact: every input carries an unrelated label, so the model
    can only memorize noise: training loss falls slowly (memorization), validation
    accuracy stays at chance. Fix: index inputs and labels with the same index and assert
    alignment once (``dataset[i]`` against the raw data). Check: look at a few decoded
    (input, label) pairs before training; the val-vs-chance comparison and train/val
    curves (train falls, val flat at ln C) expose it.
    """

    name = "shift_labels"
    category = "data"
    summary = "Pair each input with the label of the previous sample (off-by-one)."
    expected = "breaks_training"
    node_types = (cst.Call, cst.Subscript)
    examples = (
        Example(
            before="train_ds = TensorDataset(X_train, y_train)\n",
            after="train_ds = TensorDataset(X_train, y_train.roll(1, dims=0))\n",
        ),
        Example(
            before=(
                "class Digits(Dataset):\n"
                "    def __getitem__(self, idx):\n"
                "        return self.x[idx], self.y[idx]\n"
            ),
            after=(
                "class Digits(Dataset):\n"
                "    def __getitem__(self, idx):\n"
                "        return self.x[idx], self.y[idx - 1]\n"
            ),
        ),
        Example(
            before=(
                "class Pairs(Dataset):\n"
                "    def __getitem__(self, i):\n"
                "        x = self.inputs[i]\n"
                "        y = self.labels[i]\n"
                "        return x, y\n"
            ),
            after=(
                "class Pairs(Dataset):\n"
                "    def __getitem__(self, i):\n"
                "        x = self.inputs[i]\n"
                "        y = self.labels[i - 1]\n"
                "        return x, y\n"
            ),
        ),
    )
    non_examples = (
        "val_ds = TensorDataset(X_val, y_val)\n",
        "ds = TensorDataset(X)\n",
        "ds = TensorDataset(X, mask, y)\n",
        "class Chars(Dataset):\n    def __getitem__(self, i):\n        return self.data[i:i + 8]\n",
        "def lookup(table, idx):\n    return table.x[idx], table.y[idx]\n",
    )

    def _getitem_index(self, node: cst.Subscript, ctx: Context) -> str | None:
        function = ctx.enclosing_function(node)
        if function is None or function.name.value != "__getitem__":
            return None
        params = function.params.params
        if len(params) < 2 or len(node.slice) != 1:
            return None
        index = node.slice[0].slice
        name = params[1].name.value
        if isinstance(index, cst.Index) and isinstance(index.value, cst.Name):
            return name if index.value.value == name else None
        return None

    def _is_returned_label(self, node: cst.Subscript, ctx: Context) -> bool:
        """Is ``node`` the last item of the returned tuple, directly or through a name?"""
        function = ctx.enclosing_function(node)
        returned = [
            r.value
            for r in ctx.nodes_within(function, cst.Return)
            if isinstance(r.value, cst.Tuple) and len(r.value.elements) >= 2
        ]
        lasts = [values.elements[-1].value for values in returned]
        if any(last is node for last in lasts):
            return True
        target = bound_target(node, ctx)
        return isinstance(target, cst.Name) and any(
            isinstance(last, cst.Name) and last.value == target.value for last in lasts
        )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if isinstance(node, cst.Call):
            return _training_labels(node, ctx, custom=False) is not None
        return (
            isinstance(node, cst.Subscript)
            and self._getitem_index(node, ctx) is not None
            and self._is_returned_label(node, ctx)
        )

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        if isinstance(node, cst.Call):
            labels = _training_labels(node, ctx, custom=False)
            shifted = parse_expr(f"{code_of(as_receiver(labels.value))}.roll(1, dims=0)")
            return with_arg_value(node, labels, shifted)
        index = self._getitem_index(node, ctx)
        element = node.slice[0]
        return node.with_changes(
            slice=[element.with_changes(slice=cst.Index(parse_expr(f"{index} - 1")))]
        )


class ShuffleLabels(Operator):
    """Permute the training labels independently of the inputs.

    Bug: labels are shuffled on their own (a permutation applied to ``y`` but not to
    ``X``, typically when someone shuffles arrays one at a time). Impact: the
    input-label relation is destroyed while the label distribution looks perfect; the
    model memorizes at best, validation accuracy sits at chance and the training loss
    stays near ln C for a long time. Fix: draw one permutation and index inputs and
    labels with it together. Check: compare validation accuracy against chance, or
    overfit one batch and test a second batch; also spot-check (input, label) pairs.
    """

    name = "shuffle_labels"
    category = "data"
    summary = "Shuffle the training labels separately from their inputs."
    expected = "breaks_training"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="import torch\ntrain_ds = TensorDataset(X_train, y_train)\n",
            after=(
                "import torch\n"
                "train_ds = TensorDataset(X_train, y_train[torch.randperm(len(y_train))])\n"
            ),
        ),
        Example(
            before="import torch\nds = TensorDataset(X[train_idx], y[train_idx])\n",
            after=(
                "import torch\n"
                "ds = TensorDataset(X[train_idx], y[train_idx[torch.randperm(len(train_idx))]])\n"
            ),
        ),
        Example(
            before=(
                "import torch\nclass Pairs(Dataset):\n"
                "    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n"
                "    def __getitem__(self, idx):\n        return self.x[idx], self.y[idx]\n"
                "train_ds = Pairs(X_train, y_train)\nval_ds = Pairs(X_val, y_val)\n"
            ),
            after=(
                "import torch\nclass Pairs(Dataset):\n"
                "    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n"
                "    def __getitem__(self, idx):\n        return self.x[idx], self.y[idx]\n"
                "train_ds = Pairs(X_train, y_train[torch.randperm(len(y_train))])\n"
                "val_ds = Pairs(X_val, y_val)\n"
            ),
        ),
    )
    non_examples = (
        "train_ds = TensorDataset(X_train, y_train)\n",  # no torch to draw a permutation with
        # A dataset class whose constructor does not take the labels.
        "import torch\nclass Chars(Dataset):\n"
        "    def __init__(self, text, block):\n        self.text, self.block = text, block\n"
        "    def __getitem__(self, i):\n        return self.text[i], self.text[i + 1]\n"
        "ds = Chars(text, 8)\n",
        "import torch\nval_ds = TensorDataset(X_val, y_val)\n",
        "import torch\nds = TensorDataset(X, torch.tensor(labels))\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return _rewritable_labels(node, ctx) is not None

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        labels = _training_labels(node, ctx)
        torch = module_alias(ctx, "torch")
        value = labels.value
        indexed = value.slice[0].slice if isinstance(value, cst.Subscript) else None
        if isinstance(indexed, cst.Index) and len(value.slice) == 1:
            # ``y[idx]`` -> ``y[idx[perm]]``: the indices are shuffled for the labels only.
            index = code_of(indexed.value)
            permuted = f"{index}[{torch}.randperm(len({index}))]"
            shuffled = value.with_changes(
                slice=[value.slice[0].with_changes(slice=cst.Index(parse_expr(permuted)))]
            )
        else:
            code = code_of(value)
            shuffled = parse_expr(f"{code}[{torch}.randperm(len({code}))]")
        return with_arg_value(node, labels, shuffled)


class LabelNoise(Operator):
    """Replace a fraction ``p`` of the training labels by random classes.

    Bug: a fraction of the class labels is wrong (annotation noise, a buggy label
    mapping or augmentation that changes the class). Impact: the model fits the noise
    late in training; training loss plateaus well above zero, validation accuracy
    drops and the train/val gap widens with more epochs (Zhang et al. 2017 show
    networks memorize random labels). Fix: audit the label pipeline; use label
    cleaning or a noise-robust loss when noise is inherent. Check: inspect the
    highest-loss training samples, and compare train/val curves (train accuracy
    stalls near 1 - p).
    """

    name = "label_noise"
    category = "data"
    summary = "Replace a fraction p of the training labels by random classes."
    expected = "degrades"
    node_types = (cst.Call,)
    parameters = {"p": Param(0.3, "fraction of training labels replaced by a random class")}
    variants = ({"p": 0.8},)
    examples = (
        Example(
            before=(
                "import torch\ny = torch.tensor(target, dtype=torch.long)\n"
                "train_ds = TensorDataset(X, y)\n"
            ),
            after=(
                "import torch\ny = torch.tensor(target, dtype=torch.long)\n"
                "train_ds = TensorDataset(X, torch.where(torch.rand(y.shape) < 0.3, "
                "torch.randint_like(y, int(y.max()) + 1), y))\n"
            ),
        ),
        Example(
            before="import torch as T\nloss_fn = T.nn.CrossEntropyLoss()\nds = TensorDataset(X, labels)\n",
            after=(
                "import torch as T\nloss_fn = T.nn.CrossEntropyLoss()\n"
                "ds = TensorDataset(X, T.where(T.rand(labels.shape) < 0.1, "
                "T.randint_like(labels, int(labels.max()) + 1), labels))\n"
            ),
            params={"p": 0.1},
        ),
    )
    non_examples = (
        # Regression targets are not classes.
        "import torch\ny = torch.tensor(target, dtype=torch.float32)\nds = TensorDataset(X, y)\n",
        "import torch\nval_ds = TensorDataset(X_val, y_val)\nloss = F.cross_entropy(a, b)\n",
        # Nothing says the labels are classes.
        "import torch\nds = TensorDataset(X, y)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        labels = _rewritable_labels(node, ctx)
        return labels is not None and _label_kind(labels.value, ctx) == "int"

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        labels = _training_labels(node, ctx)
        torch = module_alias(ctx, "torch")
        y = code_of(labels.value)
        base = labels.value.value if isinstance(labels.value, cst.Subscript) else labels.value
        num_classes = f"int({code_of(base)}.max()) + 1"
        noisy = parse_expr(
            f"{torch}.where({torch}.rand({y}.shape) < {self.params['p']!r}, "
            f"{torch}.randint_like({y}, {num_classes}), {y})"
        )
        return with_arg_value(node, labels, noisy)


class NoShuffle(Operator):
    """Turn off shuffling of the training data.

    Bug: the training ``DataLoader`` gets ``shuffle=False`` (or a per-epoch
    ``randperm`` becomes ``arange``), so every epoch sees the same batches in the same
    order. Impact: with data stored sorted by class, each batch is one class and SGD
    chases it, so the loss oscillates and accuracy suffers badly; with data already
    randomly permuted (our classifiers split with ``randperm``) the effect is within
    noise, hence ``silent``, but consecutive language-model chunks read in text order
    train measurably worse. Fix: ``shuffle=True`` for training loaders. Check: print the labels of
    the first batches of two epochs (identical), or watch for a loss that repeats a
    periodic pattern every epoch.
    """

    name = "no_shuffle"
    category = "data"
    summary = "Train without shuffling: shuffle=True -> shuffle=False in the training loader."
    expected = "silent"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="train_loader = DataLoader(train_ds, batch_size=64, shuffle=True, generator=g)\n",
            after="train_loader = DataLoader(train_ds, batch_size=64, shuffle=False, generator=g)\n",
        ),
        Example(
            before=(
                "import torch\nfor epoch in range(3):\n"
                "    order = torch.randperm(n_train, generator=g)\n"
            ),
            after="import torch\nfor epoch in range(3):\n    order = torch.arange(n_train)\n",
        ),
    )
    non_examples = (
        "val_loader = DataLoader(val_ds, batch_size=256, shuffle=True)\n",
        "loader = DataLoader(ds, batch_size=64)\n",
        "import torch\nperm = torch.randperm(n, generator=g)\n",  # the split, not an epoch order
        # A random mini-batch, not an ordering: arange would train on one batch only.
        "import torch\nfor step in range(9):\n    idx = torch.randperm(n)[:64]\n",
    )

    def _epoch_permutation(self, node: cst.Call, ctx: Context) -> bool:
        if not (
            isinstance(node.func, cst.Attribute)
            and resolve(node, ctx, strict=False).matches(("torch.randperm",))
            and ctx.enclosing(node, (cst.For, cst.While)) is not None
        ):
            return False
        return not isinstance(ctx.parent(node), cst.Subscript)

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if is_data_loader(node, ctx):
            return shuffle_true(node) is not None and is_training_loader(node, ctx)
        return isinstance(node, cst.Call) and self._epoch_permutation(node, ctx)

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        if is_data_loader(node, ctx):
            shuffle = shuffle_true(node)
            return with_arg_value(node, shuffle, cst.Name("False"))
        args = closed_args(
            [a for a in node.args if a.keyword is None or a.keyword.value != "generator"]
        )
        return node.with_changes(func=node.func.with_changes(attr=cst.Name("arange")), args=args)


class DropInputNormalization(Operator):
    """Remove the normalization of the inputs, leaving them at raw scale.

    Bug: the standardization ``x = (x - mean) / std`` (every occurrence using the same
    statistics, train and validation alike), a pixel scaling ``x / 255`` or a
    ``transforms.Normalize`` is deleted. Impact: features on large or uneven scales
    make the loss surface ill-conditioned: a larger initial loss, slower and noisier
    convergence, sometimes divergence at a learning rate tuned for normalized inputs.
    How much depends on the raw scale: features spanning 0.001..1000 hurt badly, while
    BatchNorm after the first layer or pixels in 0..16 with Adam absorb it.
    Fix: standardize inputs with training-set statistics. Check: print input
    statistics of the first batch (mean far from 0, std far from 1); an init-loss
    check and the loss curve against the reference.
    """

    name = "drop_input_normalization"
    category = "data"
    summary = "Delete the input standardization/scaling: the model sees raw-scale inputs."
    expected = "degrades"
    node_types = (cst.BinaryOperation, cst.Call)
    examples = (
        Example(
            before=(
                "mean, std = X_train.mean(0), X_train.std(0) + 1e-8\n"
                "X_train = (X_train - mean) / std\n"
                "X_val = (X_val - mean) / std\n"
                "ds = TensorDataset(X_train, y_train)\n"
            ),
            after=(
                "mean, std = X_train.mean(0), X_train.std(0) + 1e-8\n"
                "ds = TensorDataset(X_train, y_train)\n"
            ),
        ),
        Example(
            before="import torch\nX = torch.tensor(data.data, dtype=torch.float32) / 16.0\n",
            after="import torch\nX = torch.tensor(data.data, dtype=torch.float32)\n",
        ),
        Example(
            before="def step(x):\n    return model((x.float() / 255 - mu) / sigma)\n",
            after="def step(x):\n    return model(x.float() / 255)\n",
        ),
        Example(
            before=(
                "from torchvision import transforms\n"
                "tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])\n"
            ),
            after=(
                "from torchvision import transforms\ntf = transforms.Compose([transforms.ToTensor()])\n"
            ),
        ),
    )
    non_examples = (
        "y_train = (y_train - y_mean) / y_std\n",  # regression targets, not inputs
        "change = (loss - prev_loss) / prev_loss\n",
        "lr = base_lr / 10\n",
        "progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))\n",
        "avg = total / 16\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if isinstance(node, cst.Call):
            return self._transform_list(node, ctx) is not None
        group = _normalization_group(node, ctx)
        # One site per set of statistics: dropping only some would be a train/val mismatch.
        return bool(group) and group[0] is node and self._outermost(node, ctx)

    def _outermost(self, node: cst.CSTNode, ctx: Context) -> bool:
        return not any(
            _normalized_operand(a, ctx) is not None
            for a in ctx.ancestors(node)
            if isinstance(a, cst.BinaryOperation)
        )

    def _transform_list(self, node: cst.Call, ctx: Context) -> cst.List | None:
        element = ctx.parent(node)
        holder = ctx.parent(element) if element is not None else None
        if (
            resolve(node, ctx, strict=False).matches(_NORMALIZE_TRANSFORM)
            and isinstance(element, cst.Element)
            and isinstance(holder, cst.List)
        ):
            return holder
        return None

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        if isinstance(node, cst.Call):
            holder = self._transform_list(node, ctx)
            return {holder: without_list_element(holder, node)}
        group = [m for m in _normalization_group(node, ctx) if self._outermost(m, ctx)]
        return _drop_normalizations(group, ctx)


class SkipValNormalization(Operator):
    """Normalize the training inputs but not the validation/test inputs.

    Bug: the validation (or test) split skips the standardization the training split
    gets: a forgotten line or a separate evaluation path (train/serving skew). Impact:
    training looks perfectly healthy, yet the model is evaluated on inputs of another
    scale and distribution: validation loss is high and accuracy low or erratic while
    the training loss keeps falling. Fix: build one preprocessing function and apply
    it to every split with the training statistics. Check: compare train and
    validation curves (a large gap from the first epoch), and print input statistics
    of a training and a validation batch side by side.
    """

    name = "skip_val_normalization"
    category = "data"
    summary = "Leave validation inputs unnormalized while training inputs are normalized."
    expected = "degrades"
    node_types = (cst.BinaryOperation,)
    examples = (
        Example(
            before=(
                "X_train = (X_train - mean) / std\n"
                "X_val = (X_val - mean) / std\n"
                "val_ds = TensorDataset(X_val, y_val)\n"
            ),
            after="X_train = (X_train - mean) / std\nval_ds = TensorDataset(X_val, y_val)\n",
        ),
        Example(
            before=(
                "def train_step(x):\n    return model((x - mu) / sigma)\n"
                "def evaluate(x):\n    return model((x - mu) / sigma)\n"
            ),
            after=(
                "def train_step(x):\n    return model((x - mu) / sigma)\n"
                "def evaluate(x):\n    return model(x)\n"
            ),
        ),
    )
    non_examples = (
        "X_train = (X_train - mean) / std\n",
        "X_val = (X_val - mean) / std\n",  # nothing normalized for training: not this bug
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        group = _normalization_group(node, ctx)
        if not group or _normalization_role(node, ctx) != "eval":
            return False
        return any(_normalization_role(m, ctx) != "eval" for m in group)

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        return _drop_normalizations([node], ctx)


class NormalizeWithFullStats(Operator):
    """Compute the normalization statistics on the whole dataset instead of the training split.

    Bug: ``mean``/``std`` come from all samples, validation included, before (or
    regardless of) the split: a textbook data leak. Impact: validation inputs are
    normalized with information about themselves, so validation metrics are slightly
    optimistic; in a small loop the difference is usually within noise, hence
    ``silent``, and larger with small or shifted validation sets. Fix: fit every
    preprocessing statistic on the training split only and reuse it for the other
    splits. Check: read the preprocessing code in split order (a leakage review); a
    static check that statistics are computed after and from the training split.
    """

    name = "normalize_with_full_stats"
    category = "data"
    summary = "Standardize with statistics of the full dataset (validation leaks into them)."
    expected = "silent"
    node_types = (cst.Call,)
    examples = (
        Example(
            before=(
                "X_train, y_train = X[train_idx], y[train_idx]\n"
                "mean, std = X_train.mean(0), X_train.std(0) + 1e-8\n"
                "X_train = (X_train - mean) / std\n"
            ),
            after=(
                "X_train, y_train = X[train_idx], y[train_idx]\n"
                "mean, std = X.mean(0), X.std(0) + 1e-8\n"
                "X_train = (X_train - mean) / std\n"
            ),
        ),
        Example(
            before=(
                "def prepare(X):\n    Xtr = X[:800]\n"
                "    Xtr = (Xtr - Xtr.mean(0)) / Xtr.std(0)\n    return Xtr\n"
            ),
            after=(
                "def prepare(X):\n    Xtr = X[:800]\n"
                "    Xtr = (Xtr - X.mean(0)) / X.std(0)\n    return Xtr\n"
            ),
        ),
    )
    non_examples = (
        # Statistics of the full data already.
        "mean, std = X.mean(0), X.std(0)\nX = (X - mean) / std\n",
        # A mean that is not a normalization statistic.
        "X_train = X[train_idx]\ncenter = X_train.mean(0)\nprint(center)\n",
        "X_val = X[val_idx]\nmean = X_val.mean(0)\nX_val = (X_val - mean) / 2.0\n",
    )

    def _full_data(self, call: cst.CSTNode, ctx: Context) -> str | None:
        """For ``part.mean()`` where ``part = full[idx]`` was assigned earlier: ``full``."""
        if not (isinstance(call, cst.Call) and method_name(call) in _STAT_METHODS):
            return None
        receiver = call.func.value
        if not isinstance(receiver, cst.Name) or split_role(receiver.value) == "eval":
            return None
        source = None
        for assign in nodes_in_scope_of(call, ctx, cst.Assign):
            if not starts_before(assign, call, ctx) or ctx.within(assign, call):
                continue
            for value in values_bound_by(assign, receiver.value):
                if (
                    isinstance(value, cst.Subscript)
                    and isinstance(value.value, cst.Name)
                    and value.value.value != receiver.value
                ):
                    source = value.value.value
                elif not (isinstance(value, cst.BinaryOperation)):
                    source = None  # rebound to something else: not a split any more
        return source

    def _feeds_standardization(self, call: cst.Call, ctx: Context) -> bool:
        stat_names = set()
        for node in ctx.nodes(cst.BinaryOperation):
            found = _normalized_operand(node, ctx)
            if found is None or "|" not in found[1]:
                continue
            if ctx.within(node.left.right, call) or ctx.within(node.right, call):
                return True
            stat_names |= set(variables_read(node.left.right, ctx)) | set(
                variables_read(node.right, ctx)
            )
        statement = ctx.statement_of(call)
        assigns = [s for s in getattr(statement, "body", ()) if isinstance(s, cst.Assign)]
        targets = {
            name
            for assign in assigns
            for target in assign.targets
            for name in variables_read(target.target, ctx)
        }
        return bool(targets) and targets <= stat_names

    def _sites_in_statement(self, call: cst.CSTNode, ctx: Context) -> list[cst.Call]:
        statement = ctx.statement_of(call)
        return [
            c
            for c in ctx.nodes_within(statement, cst.Call)
            if self._full_data(c, ctx) is not None and self._feeds_standardization(c, ctx)
        ]

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if self._full_data(node, ctx) is None or not self._feeds_standardization(node, ctx):
            return False
        # One site per statement: ``mean`` and ``std`` move to the full data together.
        return self._sites_in_statement(node, ctx)[0] is node

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        return {
            call.func.value: cst.Name(self._full_data(call, ctx))
            for call in self._sites_in_statement(node, ctx)
        }


class MixBatchDims(Operator):
    """Flatten with the batch dimension in the wrong place, mixing samples within a batch.

    Bug: a tensor laid out (C, B, ...) or (T, B, ...) is flattened as if it were
    (B, ...): a missing ``permute``, a ``batch_first`` mix-up, or ``view`` used where
    ``transpose`` was meant. It runs, since only the element count must fit, but row
    ``i`` now holds pieces of several samples. Impact: inputs no longer belong to
    their labels; the model learns little beyond class frequencies. Fix: flatten
    with the batch dimension first (``x.flatten(1)``) and assert shapes. Check: feed
    a batch whose samples differ (e.g. one zeroed) and verify that only that sample's
    output changes; overfit one batch.
    """

    name = "mix_batch_dims"
    category = "data"
    summary = "Flatten a batch with the batch dimension moved: samples mix within a batch."
    expected = "breaks_training"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="x = x.view(x.size(0), -1)\n",
            after="x = x.movedim(0, -1).reshape(x.size(0), -1)\n",
        ),
        Example(
            before="loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))\n",
            after=(
                "loss = F.cross_entropy(logits.transpose(0, 1).reshape(-1, logits.size(-1)), "
                "targets.view(-1))\n"
            ),
        ),
        Example(
            before="import torch\nh = torch.flatten(h, 1)\nout = self.fc(h)\n",
            after="import torch\nh = h.movedim(0, -1).reshape(h.size(0), -1)\nout = self.fc(h)\n",
        ),
        Example(
            before="x = x.reshape(-1, 28 * 28)\n",
            after="x = x.movedim(0, -1).reshape(-1, 28 * 28)\n",
        ),
    )
    non_examples = (
        "y = targets.view(-1)\n",
        "w = w.view(out_features, in_features)\n",
        "x = x.view(B, T, n_head, C // n_head)\n",
        "y = y.view(-1, 1)\n",  # a 1-D column: the rewrite would change nothing
        "import torch\nh = torch.flatten(self.pool(h), 1)\n",
    )

    def _layout(self, node: cst.CSTNode, ctx: Context) -> str | None:
        """ "sample" for a per-sample flatten, "time" for merging (B, T) and None otherwise."""
        if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
            return None
        method = node.func.attr.value
        args = [arg.value for arg in node.args]
        if any(arg.keyword is not None or arg.star for arg in node.args):
            return None
        if method in ("view", "reshape") and len(args) == 2:
            first, second = args
            if _is_batch_size(first) and _is_minus_one(second):
                return "sample"
            if _is_minus_one(first) and _is_constant_size(second):
                return "sample"
            if (_is_minus_one(first) and _is_last_dim(second)) or _is_time_merge(first):
                return "time"
            return None
        # ``flatten`` has no batch size to reuse: the rewrite repeats the tensor.
        if method == "flatten" and len(args) == 1 and number_value(args[0]) == 1:
            return "sample" if is_pure(node.func.value) else None
        if (
            len(args) == 2
            and number_value(args[1]) == 1
            and is_pure(args[0])
            and resolve(node, ctx, strict=False).matches(("torch.flatten",))
        ):
            return "sample"
        return None

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return self._layout(node, ctx) is not None

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        layout = self._layout(node, ctx)
        if method_name(node) == "flatten" or not isinstance(node.func, cst.Attribute):
            tensor = code_of(node.args[0].value if len(node.args) == 2 else node.func.value)
            return parse_expr(f"{tensor}.movedim(0, -1).reshape({tensor}.size(0), -1)")
        receiver = node.func.value
        # Moving batch to the end interleaves all samples, even when C == 1; a (T, B)
        # mix-up swaps the two leading dims, so targets pair with other tokens.
        moved = "transpose(0, 1)" if layout == "time" else "movedim(0, -1)"
        shifted = parse_expr(f"{code_of(as_receiver(receiver))}.{moved}")
        return node.with_changes(
            func=node.func.with_changes(value=shifted, attr=cst.Name("reshape"))
        )


class UnshiftedLmTargets(Operator):
    """Use the input tokens themselves as language-model targets (no shift by one).

    Bug: targets are taken from the same window as the inputs (``y = chunk[:-1]``
    instead of ``chunk[1:]``; ``data[i:i + T]`` instead of ``data[i + 1:i + T + 1]``).
    Impact: the model only has to copy its current input token, so the training and
    validation loss fall towards zero (too good to be true) and the model is useless
    for generation. Fix: targets are the inputs shifted one position to the left.
    Check: an init-loss check passes, but a loss far below the entropy of the data
    (e.g. under 1 nat per character) gives it away; decode one (x, y) pair and compare.
    """

    name = "unshifted_lm_targets"
    category = "data"
    summary = "Language-model targets equal the inputs instead of the next tokens."
    expected = "breaks_training"
    node_types = (cst.Subscript,)
    examples = (
        Example(
            before="x, y = chunk[:-1], chunk[1:]\n",
            after="x, y = chunk[:-1], chunk[:-1]\n",
        ),
        Example(
            before=(
                "def get_batch(data, ix):\n"
                "    x = torch.stack([data[i:i + T] for i in ix])\n"
                "    y = torch.stack([data[i + 1:i + T + 1] for i in ix])\n"
                "    return x, y\n"
            ),
            after=(
                "def get_batch(data, ix):\n"
                "    x = torch.stack([data[i:i + T] for i in ix])\n"
                "    y = torch.stack([data[i:i + T] for i in ix])\n"
                "    return x, y\n"
            ),
        ),
        Example(
            before="x = src[:, i : i + seq_len]\ny = src[:, i + 1 : i + 1 + seq_len]\n",
            after="x = src[:, i : i + seq_len]\ny = src[:, i : i + seq_len]\n",
        ),
        Example(
            before="inputs, targets = tokens[:, :-1], tokens[:, 1:]\n",
            after="inputs, targets = tokens[:, :-1], tokens[:, :-1]\n",
        ),
    )
    non_examples = (
        "x, y = chunk[:-1], chunk[:-1]\n",
        "velocity = t[1:] - t[:-1]\n",
        "x, y = a[:-1], b[1:]\n",
        "head, rest = items[:1], items[1:]\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return _unshifted_source(node, ctx) is not None

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        source = _unshifted_source(node, ctx)
        return node.with_changes(slice=source.deep_clone().slice)


class TrainValLeakage(Operator):
    """Let the validation data overlap the training data.

    Bug: the training split takes every sample (``train_idx = perm`` instead of
    ``perm[:n_train]``), or the validation loader is built from the training dataset
    (a copy-paste slip). Impact: validation measures memorization: validation loss
    tracks the training loss and accuracy is inflated, so model selection and early
    stopping are misled while training itself looks normal (``silent`` to a loss
    curve). Fix: split once, by index, and assert the index sets are disjoint.
    Check: assert ``set(train_idx).isdisjoint(val_idx)``; a train/val gap that is
    suspiciously near zero when comparing train/val curves.
    """

    name = "train_val_leakage"
    category = "data"
    summary = "Validation overlaps training: train on every index, or validate on the train set."
    expected = "silent"
    node_types = (cst.Subscript, cst.Call)
    examples = (
        Example(
            before="train_idx, val_idx = perm[:n_train], perm[n_train:]\n",
            after="train_idx, val_idx = perm, perm[n_train:]\n",
        ),
        Example(
            before=("X_train, y_train, X_val, y_val = X[:400], y[:400], X[400:], y[400:]\n"),
            after="X_train, y_train, X_val, y_val = X, y, X[400:], y[400:]\n",
        ),
        Example(
            before="val_idx, train_idx = perm[:n_val], perm[n_val:]\n",
            after="val_idx, train_idx = perm[:n_val], perm\n",
        ),
        Example(
            before="tr, va, te = perm[:n_train], perm[n_train:-n_test], perm[-n_test:]\n",
            after="tr, va, te = perm, perm[n_train:-n_test], perm[-n_test:]\n",
        ),
        Example(
            before=(
                "train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)\n"
                "val_loader = DataLoader(val_ds, batch_size=256)\n"
            ),
            after=(
                "train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)\n"
                "val_loader = DataLoader(train_ds, batch_size=256)\n"
            ),
        ),
    )
    non_examples = (
        "x, y = chunk[:-1], chunk[1:]\n",
        "first = items[:3]\n",
        "train_loader = DataLoader(train_ds, shuffle=True)\nval_loader = DataLoader(train_ds)\n",
    )

    def _training_loader_dataset(self, ctx: Context) -> cst.Arg | None:
        for call in ctx.nodes(cst.Call):
            if is_training_loader(call, ctx):
                return _dataset_arg(call)  # type: ignore[arg-type]
        return None

    def _leaky_loader(self, node: cst.CSTNode, ctx: Context) -> tuple[cst.Arg, cst.Arg] | None:
        if not is_data_loader(node, ctx) or loader_role(node, ctx) != "eval":
            return None
        dataset, training = _dataset_arg(node), self._training_loader_dataset(ctx)
        if dataset is None or training is None:
            return None
        if compact_code(dataset.value) == compact_code(training.value):
            return None
        return dataset, training

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if isinstance(node, cst.Call):
            return self._leaky_loader(node, ctx) is not None
        side = _split_training_side(node, ctx)
        return bool(side) and side[0] is node

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        if isinstance(node, cst.Call):
            dataset, training = self._leaky_loader(node, ctx)
            return {dataset.value: training.value.deep_clone()}
        return {part: _unwrapped_subscript(part) for part in _split_training_side(node, ctx)}


def _unwrapped_subscript(part: cst.Subscript) -> cst.BaseExpression:
    return part.value.deep_clone()


class DropTrainingData(Operator):
    """Train on a small fraction of the training split only.

    Bug: most training samples are silently lost (a debugging subset left in, a wrong
    split size, a filter that drops most rows). ``fraction`` is the share dropped.
    Impact: the model overfits the few samples left: training loss falls fast,
    validation loss turns up early and validation accuracy is lower; each epoch is
    also much shorter. Fix: check dataset sizes against expectations. Check: log
    ``len(train_loader.dataset)`` and steps per epoch; compare train/val curves (an
    early, widening gap).
    """

    name = "drop_training_data"
    category = "data"
    summary = "Keep only a fraction of the training split (fraction = share dropped)."
    expected = "degrades"
    node_types = (cst.Subscript,)
    parameters = {"fraction": Param(0.9, "share of the training samples dropped")}
    variants = ({"fraction": 0.5},)
    examples = (
        Example(
            before="train_idx, val_idx = perm[:n_train], perm[n_train:]\n",
            after="train_idx, val_idx = perm[:int(n_train * 0.1)], perm[n_train:]\n",
        ),
        Example(
            before="X_train, y_train, X_val, y_val = X[:400], y[:400], X[400:], y[400:]\n",
            after="X_train, y_train, X_val, y_val = X[:200], y[:200], X[400:], y[400:]\n",
            params={"fraction": 0.5},
        ),
        Example(
            before="train_data, val_data = data[:n - n_val], data[n - n_val:]\n",
            after="train_data, val_data = data[:int((n - n_val) * 0.1)], data[n - n_val:]\n",
        ),
    )
    non_examples = (
        "val_idx, train_idx = perm[:n_val], perm[n_val:]\n",  # the training side is the tail
        "first = items[:3]\n",
    )

    def _kept_bound(self, upper: cst.BaseExpression) -> cst.BaseExpression:
        keep = round(1.0 - self.params["fraction"], 10)
        if isinstance(upper, cst.Integer):
            return cst.Integer(str(max(1, int(int(upper.value) * keep))))
        code = code_of(upper)
        if not isinstance(upper, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            code = f"({code})"
        return parse_expr(f"int({code} * {keep!r})")

    def _training_heads(self, node: cst.CSTNode, ctx: Context) -> list[cst.Subscript]:
        side = _split_training_side(node, ctx)
        return side if side and all(_head_bound(part) for part in side) else []

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        heads = self._training_heads(node, ctx)
        return bool(heads) and heads[0] is node

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        edits: dict[cst.CSTNode, Replacement] = {}
        for part in self._training_heads(node, ctx):
            bound = _single_slice(part)
            edits[bound] = bound.with_changes(upper=self._kept_bound(bound.upper))
        return edits
