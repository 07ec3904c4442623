"""The ``drop_training_data`` operator (DropTrainingData)."""

from __future__ import annotations

import libcst as cst

from mutations.data._shared import head_bound, single_slice, split_training_side
from mutator.context import Context
from mutator.operator import Edits, Example, Operator, Param, Replacement
from mutator.semantics import (
    code_of,
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
    )
    non_examples = (
        "val_idx, train_idx = perm[:n_val], perm[n_val:]\n",  # the training side is the tail
        "first = items[:3]\n",
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

    def _training_heads(self, node: cst.CSTNode, ctx: Context) -> list[cst.Subscript]:
        side = split_training_side(node, ctx)
        return side if side and all(head_bound(part) for part in side) else []

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        heads = self._training_heads(node, ctx)
        if not heads or heads[0] is not node:
            return None
        edits: dict[cst.CSTNode, Replacement] = {}
        for part in heads:
            bound = single_slice(part)
            edits[bound] = bound.with_changes(upper=self._kept_bound(bound.upper))
        return edits
