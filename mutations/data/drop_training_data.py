"""The ``drop_training_data`` operator (DropTrainingData)."""

from __future__ import annotations

import libcst as cst

from mutations.data._shared import not_a_data_split, single_slice, split_training_side
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator, Param, Replacement
from mutator.semantics import (
    code_of,
    is_pure,
    parse_expr,
)


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
    witness = "fewer train_samples", "the training forwards see fewer samples"
    claims = frozenset({"shrinks_slice"})
    node_types = (cst.Subscript,)
    parameters = {"fraction": Param(0.9, "share of the training samples dropped", valid="(0, 1)")}
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
        Example(  # PyG datasets slice by fraction
            before="""
                train_loader = DataLoader(dataset[:0.9], batch_size, shuffle=True)
                test_loader = DataLoader(dataset[0.9:], batch_size)
            """,
            after="""
                train_loader = DataLoader(dataset[:0.09], batch_size, shuffle=True)
                test_loader = DataLoader(dataset[0.9:], batch_size)
            """,
        ),
        # The training split is the tail (issue 29): its lower bound moves up.
        Example(
            before="val_data, train_data = data[:n_val], data[n_val:]\n",
            after="val_data, train_data = data[:n_val], data[n_val + int((len(data) - n_val) * 0.9):]\n",
        ),
    )
    non_examples = (
        "first = items[:3]\n",
        # Names, not samples (issue 29).
        """
            metric_names = ["loss", "acc", "val_loss", "val_acc"]
            shown, hidden = metric_names[:n_shown], metric_names[n_shown:]
        """,
        """
            def draw(predictions, n_input, path):
                with open(path, "w") as f:
                    for wave in predictions:
                        observed, future = wave[:n_input], wave[n_input:]
                        f.write(str(observed) + ";" + str(future))
        """,
    )

    def _kept_bound(self, upper: cst.BaseExpression) -> cst.BaseExpression:
        keep = round(1.0 - self.params["fraction"], 10)
        if isinstance(upper, cst.Integer):
            return cst.Integer(str(max(1, int(int(upper.value) * keep))))
        if isinstance(upper, cst.Float) and 0 < float(upper.value) < 1:
            # ``dataset[:0.9]`` (PyG slices by fraction): keep a fraction of that fraction;
            # int() would turn it into an empty split (issue 22).
            return cst.Float(repr(round(float(upper.value) * keep, 10)))
        code = code_of(upper)
        if not isinstance(upper, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            code = f"({code})"
        return parse_expr(f"int({code} * {keep!r})")

    def _raised_lower(self, part: cst.Subscript, lower: cst.BaseExpression):
        """The lower bound of a training tail ``data[K:]`` that keeps ``1 - fraction`` of it."""
        fraction = round(self.params["fraction"], 10)
        keep = round(1.0 - fraction, 10)
        if isinstance(lower, cst.Float) and 0 < float(lower.value) < 1:
            return cst.Float(repr(round(1 - (1 - float(lower.value)) * keep, 10)))
        if isinstance(lower, cst.UnaryOperation) and isinstance(lower.operator, cst.Minus):
            return parse_expr(f"int({code_of(lower)} * {keep!r})")  # the last rows
        if not is_pure(part.value):
            return None  # ``len(...)`` would evaluate it again
        base, code = code_of(part.value), code_of(lower)
        if not isinstance(lower, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer)):
            code = f"({code})"
        return parse_expr(f"{code} + int((len({base}) - {code}) * {fraction!r})")

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        side = split_training_side(node, ctx)
        if not side or side[0] is not node:
            return None
        reason = not_a_data_split(node, ctx)  # type: ignore[arg-type]
        if reason is not None:
            return NonSite(reason)
        edits: dict[cst.CSTNode, Replacement] = {}
        for part in side:
            bound = single_slice(part)
            if bound.lower is None:
                edits[bound] = bound.with_changes(upper=self._kept_bound(bound.upper))
                continue
            # A training tail (``val, train = data[:n_val], data[n_val:]``, issue 29).
            lower = self._raised_lower(part, bound.lower) if bound.upper is None else None
            if lower is None:
                return None
            edits[bound] = bound.with_changes(lower=lower)
        return edits
