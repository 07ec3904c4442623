"""The ``normalize_with_full_stats`` operator (NormalizeWithFullStats)."""

from __future__ import annotations

import libcst as cst

from mutations.data._shared import normalized_operand, not_input_statistics
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    drives_training,
    loops_around,
    method_name,
    nodes_in_scope_of,
    split_role,
    starts_before,
    values_bound_by,
    variables_read,
)

_STAT_METHODS = frozenset({"mean", "std", "var", "min", "max", "amin", "amax"})


class NormalizeWithFullStats(Operator):
    """Compute the normalization statistics on the whole dataset instead of the training split.

    Bug: ``mean``/``std`` come from all samples, validation included, before (or
    regardless of) the split: a textbook data leak. Impact: validation inputs are
    normalized with information about themselves, so validation metrics are slightly
    optimistic; in a small loop the difference is usually within noise, hence
    ``silent``, and larger with small or shifted validation sets. Fix: fit every
    preprocessing statistic on the training split only and reuse it for the other
    splits. A minibatch standardised inside the training loop (PPO's advantages) is no
    site: the whole it comes from is training data too (issue 29). Check: read the preprocessing code in split order (a leakage review); a
    static check that statistics are computed after and from the training split.
    """

    name = "normalize_with_full_stats"
    category = "data"
    summary = "Standardize with statistics of the full dataset (validation leaks into them)."
    expected = "silent"
    witness = "differs train_inputs|eval_inputs|targets", "inputs or targets differ (full stats)"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                X_train, y_train = X[train_idx], y[train_idx]
                mean, std = X_train.mean(0), X_train.std(0) + 1e-8
                X_train = (X_train - mean) / std
            """,
            after="""
                X_train, y_train = X[train_idx], y[train_idx]
                mean, std = X.mean(0), X.std(0) + 1e-8
                X_train = (X_train - mean) / std
            """,
        ),
        Example(
            before="""
                def prepare(X):
                    Xtr = X[:800]
                    Xtr = (Xtr - Xtr.mean(0)) / Xtr.std(0)
                    return Xtr
            """,
            after="""
                def prepare(X):
                    Xtr = X[:800]
                    Xtr = (Xtr - X.mean(0)) / X.std(0)
                    return Xtr
            """,
        ),
    )
    non_examples = (
        # Statistics of the full data already.
        """
            mean, std = X.mean(0), X.std(0)
            X = (X - mean) / std
        """,
        # A mean that is not a normalization statistic.
        """
            X_train = X[train_idx]
            center = X_train.mean(0)
            print(center)
        """,
        """
            X_val = X[val_idx]
            mean = X_val.mean(0)
            X_val = (X_val - mean) / 2.0
        """,
        # A minibatch of the rollout standardised in the update loop (PPO, issue 29).
        """
            for epoch in range(4):
                for start in range(0, n, mb):
                    mb_adv = b_advantages[inds[start:start + mb]]
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                    loss = -(mb_adv * ratio).mean()
                    loss.backward()
                    optimizer.step()
        """,
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
                elif not isinstance(value, cst.BinaryOperation):
                    source = None  # rebound to something else: not a split any more
        return source

    def _feeds_standardization(self, call: cst.Call, ctx: Context) -> bool:
        stat_names = set()
        for node in ctx.nodes(cst.BinaryOperation):
            found = normalized_operand(node, ctx)
            if found is None or "|" not in found[1] or not_input_statistics(node, ctx):
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

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        if self._full_data(node, ctx) is None or not self._feeds_standardization(node, ctx):
            return None
        # One site per statement: ``mean`` and ``std`` move to the full data together.
        if self._sites_in_statement(node, ctx)[0] is not node:
            return None
        if any(drives_training(loop, ctx) for loop in loops_around(node, ctx)):
            return NonSite(
                "statistics of a minibatch inside the training loop (PPO's advantages): the "
                "whole is training data too, no held-out data leaks into them"
            )
        return {
            call.func.value: cst.Name(self._full_data(call, ctx))
            for call in self._sites_in_statement(node, ctx)
        }
