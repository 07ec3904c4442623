"""The ``train_val_leakage`` operator (TrainValLeakage)."""

from __future__ import annotations

import libcst as cst

from mutations.data._shared import not_a_data_split, split_training_side
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    bound_target,
    compact_code,
    find_arg,
    is_data_loader,
    is_training_loader,
    loader_role,
    names_read,
)


def _dataset_arg(loader: cst.Call) -> cst.Arg | None:
    return find_arg(loader, keyword="dataset", position=0)


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
    witness = "differs train_inputs|eval_inputs", "training or evaluation forwards see other data"
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
            before="""
                train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
                val_loader = DataLoader(val_ds, batch_size=256)
                evaluate(model, val_loader)
            """,
            after="""
                train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
                val_loader = DataLoader(train_ds, batch_size=256)
                evaluate(model, val_loader)
            """,
        ),
    )
    non_examples = (
        "x, y = chunk[:-1], chunk[1:]\n",
        # A slice of metric names is no split of the data (issue 29).
        "train_keys, val_keys = metric_keys[:n_train], metric_keys[n_train:]\n",
        # The test loader is built but never read (LLMs-from-scratch, chapter 6).
        """
            train_loader = DataLoader(train_ds, batch_size=8, shuffle=True)
            test_loader = DataLoader(test_ds, batch_size=8)
            fit(model, train_loader)
        """,
        "first = items[:3]\n",
        """
            train_loader = DataLoader(train_ds, shuffle=True)
            val_loader = DataLoader(train_ds)
        """,
        """
            def draw(predictions, n_input, path):
                with open(path, "w") as f:
                    for wave in predictions:
                        observed, future = wave[:n_input], wave[n_input:]
                        f.write(str(observed) + ";" + str(future))
        """,
    )

    def _training_loader_dataset(self, ctx: Context) -> cst.Arg | None:
        for call in ctx.nodes(cst.Call):
            if is_training_loader(call, ctx):
                return _dataset_arg(call)  # type: ignore[arg-type]
        return None

    def _leaky_loader(self, node: cst.CSTNode, ctx: Context) -> tuple[cst.Arg, cst.Arg] | None:
        if not is_data_loader(node, ctx) or loader_role(node, ctx) != "eval":
            return None
        bound = bound_target(node, ctx)
        if isinstance(bound, cst.Name) and bound.value not in names_read(ctx):
            return None  # a loader nothing reads (issue 22): no evaluation to mislead
        dataset, training = _dataset_arg(node), self._training_loader_dataset(ctx)
        if dataset is None or training is None:
            return None
        if compact_code(dataset.value) == compact_code(training.value):
            return None
        return dataset, training

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        if isinstance(node, cst.Call):
            leaky = self._leaky_loader(node, ctx)
            if leaky is None:
                return None
            dataset, training = leaky
            return {dataset.value: training.value.deep_clone()}
        side = split_training_side(node, ctx)
        if not side or side[0] is not node:
            return None
        reason = not_a_data_split(node, ctx)  # type: ignore[arg-type]
        if reason is not None:
            return NonSite(reason)
        return {part: _unwrapped_subscript(part) for part in side}


def _unwrapped_subscript(part: cst.Subscript) -> cst.BaseExpression:
    return part.value.deep_clone()
