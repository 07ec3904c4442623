"""The ``unshifted_lm_targets`` operator (UnshiftedLmTargets)."""

from __future__ import annotations

from collections import Counter

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    compact_code,
    is_label_name,
    looks_like_loss_call,
    nodes_in_scope_of,
    number_value,
    receiving_name,
    split_role_of,
)


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


def _is_target(node: cst.CSTNode, ctx: Context) -> bool:
    """Is the shifted slice a target: bound to a label name (``y``, ``targets``), or handed
    to a loss?"""
    name = receiving_name(node, ctx)
    if name is not None and is_label_name(name.rsplit(".", 1)[-1]):
        return True
    return any(
        isinstance(a, cst.Call) and looks_like_loss_call(a, ctx)
        for a in ctx.ancestors(node)
        if not isinstance(a, cst.BaseStatement)
    )


class UnshiftedLmTargets(Swap):
    """Use the input tokens themselves as language-model targets (no shift by one).

    Bug: targets are taken from the same window as the inputs (``y = chunk[:-1]``
    instead of ``chunk[1:]``; ``data[i:i + T]`` instead of ``data[i + 1:i + T + 1]``).
    A shifted slice that is no target (a reward column, ``zip(dims[:-1], dims[1:])``) is no
    site. Impact: the model only has to copy its current input token, so the training and
    validation loss fall towards zero (too good to be true) and the model is useless
    for generation. Fix: targets are the inputs shifted one position to the left.
    Check: an init-loss check passes, but a loss far below the entropy of the data
    (e.g. under 1 nat per character) gives it away; decode one (x, y) pair and compare.
    """

    name = "unshifted_lm_targets"
    category = "data"
    summary = "Language-model targets equal the inputs instead of the next tokens."
    expected = "breaks_training"
    witness = "differs targets", "the targets reaching the training loss differ"
    node_types = (cst.Subscript,)
    examples = (
        Example(
            before="x, y = chunk[:-1], chunk[1:]\n",
            after="x, y = chunk[:-1], chunk[:-1]\n",
        ),
        Example(
            before="""
                def get_batch(data, ix):
                    x = torch.stack([data[i:i + T] for i in ix])
                    y = torch.stack([data[i + 1:i + T + 1] for i in ix])
                    return x, y
            """,
            after="""
                def get_batch(data, ix):
                    x = torch.stack([data[i:i + T] for i in ix])
                    y = torch.stack([data[i:i + T] for i in ix])
                    return x, y
            """,
        ),
        Example(
            before="""
                x = src[:, i : i + seq_len]
                y = src[:, i + 1 : i + 1 + seq_len]
            """,
            after="""
                x = src[:, i : i + seq_len]
                y = src[:, i : i + seq_len]
            """,
        ),
        Example(
            before="inputs, targets = tokens[:, :-1], tokens[:, 1:]\n",
            after="inputs, targets = tokens[:, :-1], tokens[:, :-1]\n",
        ),
        Example(  # the shifted window handed straight to the loss
            before="""
                import torch.nn.functional as F
                logits = model(seq[:, :-1])
                loss = F.cross_entropy(logits.transpose(1, 2), seq[:, 1:])
            """,
            after="""
                import torch.nn.functional as F
                logits = model(seq[:, :-1])
                loss = F.cross_entropy(logits.transpose(1, 2), seq[:, :-1])
            """,
        ),
    )
    non_examples = (
        "x, y = chunk[:-1], chunk[:-1]\n",
        "velocity = t[1:] - t[:-1]\n",
        "x, y = a[:-1], b[1:]\n",
        "head, rest = items[:1], items[1:]\n",
        # held-out targets: only an evaluation number changes
        """
            test_input = torch.from_numpy(data[:3, :-1])
            test_target = torch.from_numpy(data[:3, 1:])
        """,
        # No LM targets (issue 22): a U-Net's channel pairs and a replay buffer's columns.
        "in_out = list(zip(dims[:-1], dims[1:]))\n",
        """
            b_a = torch.LongTensor(b_memory[:, N_STATES:N_STATES + 1])
            b_r = torch.FloatTensor(b_memory[:, N_STATES + 1:N_STATES + 2])
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        source = _unshifted_source(node, ctx)
        if source is None:
            return None
        if split_role_of(node, ctx) == "eval":
            return NonSite("held-out targets: an evaluation number changes, not training")
        if not _is_target(node, ctx):
            return None  # a reward column, consecutive pairs: a shifted slice, no LM target
        return node.with_changes(slice=source.deep_clone().slice)
