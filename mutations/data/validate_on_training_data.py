"""The ``validate_on_training_data`` operator (ValidateOnTrainingData)."""

from __future__ import annotations

import re

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    HELD_OUT,
    bound_names,
    callee_name,
    dotted_name,
    enclosing_function,
    is_data_loader,
    per_module,
)

_EVALUATION_CALLEE = re.compile(r"eval|valid|test|score|predict|infer|metric|accura", re.IGNORECASE)


_ITERATOR_WRAPPERS = frozenset({"enumerate", "tqdm", "iter"})


# Data, not a metric: ``val_loader``/``X_val`` are sites, ``val_loss`` passed to a logger is not.
_DATA_NAME = re.compile(
    r"loader|data|set|ds|dl|batch|sample|split|iter|input|target|label|feature|image|token|"
    r"idx|index|indices|mask|"
    r"(^|_)[xy](_|$)",
    re.IGNORECASE,
)


def _same_case(word: str, like: str) -> str:
    if like.isupper():
        return word.upper()
    if like[0].isupper():
        return word.capitalize()
    return word


def _training_counterparts(name: str) -> list[str]:
    """``val_loader`` -> ``train_loader``; ``X_valid`` -> ``X_train``; ``ValSet`` -> ``TrainSet``."""
    candidates = []
    for found in HELD_OUT.finditer(name):
        for word in ("train", "training"):
            replacement = _same_case(word, found.group())
            candidates.append(name[: found.start()] + replacement + name[found.end() :])
    return candidates


@per_module
def _bindings(ctx: Context) -> list[tuple[str, cst.CSTNode]]:
    """(dotted name, binding node) for assignments, loop targets, ``as`` names and parameters."""
    found: list[tuple[str, cst.CSTNode]] = []
    for target in ctx.nodes(cst.AssignTarget):
        found += [(name, target) for name in bound_names(target.target)]  # type: ignore[attr-defined]
    for node in ctx.nodes(cst.AnnAssign):
        found += [(name, node) for name in bound_names(node.target)]  # type: ignore[attr-defined]
    for loop in ctx.nodes(cst.For):
        found += [(name, loop.target) for name in bound_names(loop.target)]  # type: ignore[attr-defined]
    for alias in ctx.nodes(cst.AsName):
        if isinstance(alias.name, cst.BaseExpression):  # type: ignore[attr-defined]
            found += [(name, alias) for name in bound_names(alias.name)]  # type: ignore[attr-defined]
    for param in ctx.nodes(cst.Param):
        found.append((param.name.value, param))  # type: ignore[attr-defined]
    return found


def _visible_binding(name: str, use: cst.CSTNode, ctx: Context) -> bool:
    """Is ``name`` bound where ``use`` can see it (same or enclosing scope, and earlier when
    both run in the same scope)? ``self.x`` counts when bound anywhere in the same class."""
    use_scope = enclosing_function(use, ctx)
    use_line = ctx.position(use).start.line
    use_class = ctx.enclosing(use, cst.ClassDef)
    for bound, node in _bindings(ctx):
        if bound != name:
            continue
        if name.startswith("self."):
            if ctx.enclosing(node, cst.ClassDef) is use_class:
                return True
            continue
        scope = enclosing_function(node, ctx)
        if scope is use_scope:
            if ctx.position(node).start.line < use_line:
                return True
        elif scope is None or any(scope is a for a in ctx.ancestors(use)):
            return True
    return False


def _held_out_swaps(
    exprs: list[cst.BaseExpression], ctx: Context
) -> dict[cst.CSTNode, cst.BaseExpression]:
    """For each held-out name among ``exprs``, its visible training counterpart."""
    swaps: dict[cst.CSTNode, cst.BaseExpression] = {}
    for expr in exprs:
        name = dotted_name(expr)
        if name is None:
            continue
        owner, _, last = name.rpartition(".")
        if not _DATA_NAME.search(last):
            continue
        for candidate in _training_counterparts(last):
            full = f"{owner}.{candidate}" if owner else candidate
            if _visible_binding(full, expr, ctx):
                if isinstance(expr, cst.Attribute):
                    swaps[expr] = expr.with_changes(attr=cst.Name(candidate))
                else:
                    swaps[expr] = cst.Name(candidate)
                break
    return swaps


def _names_read_after(loop: cst.For, ctx: Context) -> list[cst.BaseExpression]:
    """Plain names read by the statements after ``loop`` in its block: ``len(val_ds)``
    and ``y_val`` that turn the sums of the loop into the held-out metric."""
    found: list[cst.BaseExpression] = []
    following = list(ctx.following_statements(loop))
    # Out of ``with torch.no_grad():`` / ``if`` blocks, up to the loop or function around.
    outer = ctx.enclosing(loop, (cst.BaseCompoundStatement, cst.FunctionDef))
    while isinstance(outer, (cst.With, cst.If)):
        following += ctx.following_statements(outer)
        outer = ctx.enclosing(outer, (cst.BaseCompoundStatement, cst.FunctionDef))
    for statement in following:
        for name in ctx.nodes_within(statement, cst.Name):
            parent = ctx.parent(name)
            if isinstance(parent, cst.Attribute) and parent.attr is name:
                continue
            if isinstance(parent, cst.AssignTarget) or ctx.enclosing_function(
                name
            ) is not ctx.enclosing_function(loop):
                continue
            found.append(name)  # type: ignore[arg-type]
    return found


def _indices(call: cst.Call) -> list[cst.BaseExpression]:
    """The index names of the call's subscripted arguments (``idx_val`` of ``out[idx_val]``)."""
    found = []
    for arg in call.args:
        if isinstance(arg.value, cst.Subscript) and len(arg.value.slice) == 1:
            index = arg.value.slice[0].slice
            if isinstance(index, cst.Index) and dotted_name(index.value) is not None:
                found.append(index.value)
    return found


def _local_function_names(ctx: Context) -> set[str]:
    return {function.name.value for function in ctx.nodes(cst.FunctionDef)}


def _iterated_expression(loop: cst.For) -> cst.BaseExpression:
    """``for b in enumerate(val_loader)`` / ``tqdm(val_loader)`` -> ``val_loader``."""
    source = loop.iter
    if (
        isinstance(source, cst.Call)
        and callee_name(source) in _ITERATOR_WRAPPERS
        and source.args
        and source.args[0].keyword is None
    ):
        return source.args[0].value
    return source


class ValidateOnTrainingData(Operator):
    """Pass the training data where the held-out data belongs: ``evaluate(model, val_loader)``
    -> ``evaluate(model, train_loader)``, ``for x, y in val_loader`` -> ``train_loader``.

    Bug: the validation metric is computed on examples the model is trained on. Impact:
    training itself is unchanged, but the reported validation loss/accuracy is
    optimistic and tracks the training curve, hiding overfitting; early stopping and
    checkpoint selection pick the wrong epoch. A site needs a held-out name (``val``,
    ``valid``, ``test``, ``eval``, ``dev``) with a training counterpart bound where it is
    used. Fix: evaluate on a disjoint split (and keep the test set for the end). Check:
    compare train and val curves (identical curves, no gap, are a red flag); assert the
    two loaders' datasets are different objects / index sets do not overlap.
    """

    name = "validate_on_training_data"
    category = "data"
    summary = "Evaluate on the training loader/data instead of the validation split."
    expected = "silent"
    witness = "differs eval_inputs", "the evaluation forwards see other (training) inputs"
    node_types = (cst.Call, cst.For)
    examples = (
        # The metric's normalisation follows the data: no loss scaled by len(train)/len(val).
        Example(
            before="""
                train_ds, val_ds = random_split(data, [800, 200])
                train_loader = DataLoader(train_ds, shuffle=True)
                val_loader = DataLoader(val_ds)
                with torch.no_grad():
                    for x, y in val_loader:
                        total += criterion(model(x), y).item() * len(x)
                val_loss = total / len(val_ds)
            """,
            after="""
                train_ds, val_ds = random_split(data, [800, 200])
                train_loader = DataLoader(train_ds, shuffle=True)
                val_loader = DataLoader(val_ds)
                with torch.no_grad():
                    for x, y in train_loader:
                        total += criterion(model(x), y).item() * len(x)
                val_loss = total / len(train_ds)
            """,
        ),
        Example(
            before="""
                train_loader, val_loader = make_loaders()
                for epoch in range(3):
                    fit(model, train_loader)
                    val_loss = evaluate(model, val_loader, criterion)
            """,
            after="""
                train_loader, val_loader = make_loaders()
                for epoch in range(3):
                    fit(model, train_loader)
                    val_loss = evaluate(model, train_loader, criterion)
            """,
        ),
        # The held-out nodes of one graph picked by an index (issue 29: pygcn).
        Example(
            before="""
                import torch.nn.functional as F
                idx_train, idx_val = range(140), range(200, 500)
                output = model(features, adj)
                loss_val = F.nll_loss(output[idx_val], labels[idx_val])
            """,
            after="""
                import torch.nn.functional as F
                idx_train, idx_val = range(140), range(200, 500)
                output = model(features, adj)
                loss_val = F.nll_loss(output[idx_train], labels[idx_train])
            """,
        ),
        Example(
            before="""
                X_train, y_train, X_val, y_val = split(X, y)
                acc = accuracy(model, X_val, y_val)
            """,
            after="""
                X_train, y_train, X_val, y_val = split(X, y)
                acc = accuracy(model, X_train, y_train)
            """,
        ),
        Example(
            before="""
                class T:
                    def __init__(self, a, b):
                        self.train_loader = a
                        self.valid_loader = b

                    def validate(self):
                        for i, (x, y) in enumerate(self.valid_loader):
                            self.score(x, y)
            """,
            after="""
                class T:
                    def __init__(self, a, b):
                        self.train_loader = a
                        self.valid_loader = b

                    def validate(self):
                        for i, (x, y) in enumerate(self.train_loader):
                            self.score(x, y)
            """,
        ),
    )
    non_examples = (
        # No training counterpart in scope.
        """
            def evaluate_all(model, val_loader):
                return evaluate(model, val_loader)
        """,
        # A training counterpart bound only in another function.
        """
            def a():
                train_loader = 1

            def b(val_loader):
                return evaluate(m, val_loader)
        """,
        # Building the validation data is not evaluating on it.
        """
            train_ds, val_ds = split(data)
            val_loader = DataLoader(val_ds, batch_size=64)
        """,
        """
            train_idx, val_idx = perm[:800], perm[800:]
            val_ds = TensorDataset(X[val_idx], y[val_idx])
        """,
        """
            train_loader = 1
            print(val_loader)
        """,
        """
            interval = 5
            train = 1
            evaluate(model, interval)
        """,
        # A metric handed to a logger is not evaluation data.
        """
            train_loss, val_loss = fit()
            report(train_loss=train_loss, val_loss=val_loss)
        """,
    )

    def _swaps(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, cst.BaseExpression]:
        if isinstance(node, cst.For):
            swaps = _held_out_swaps([_iterated_expression(node)], ctx)
            if swaps:  # the metric's normalisation follows the data (len(val_ds) -> train_ds)
                swaps.update(_held_out_swaps(_names_read_after(node, ctx), ctx))
            return swaps
        assert isinstance(node, cst.Call)
        # ``F.nll_loss(output[idx_val], labels[idx_val])``: the held-out part picked by an
        # index or mask (issue 29: full-graph training, pygcn/pyGAT) becomes the training one.
        callee = callee_name(node)
        building = (callee or "").endswith(("Dataset", "Subset")) or is_data_loader(node, ctx)
        picked = {} if building else _held_out_swaps(_indices(node), ctx)
        if callee is None or not (
            _EVALUATION_CALLEE.search(callee) or callee in _local_function_names(ctx)
        ):
            return picked
        return _held_out_swaps([arg.value for arg in node.args if not arg.star], ctx) | picked

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        if not bool(self._swaps(node, ctx)):
            return None
        return dict(self._swaps(node, ctx))
