"""The ``last_item_instead_of_list`` operator (LastItemInsteadOfList)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    TRAINING_CONTEXTS,
    bound_names,
    method_name,
    receiver,
    resolve,
    starts_before,
)

_BATCHERS = (
    "torch.tensor",
    "torch.as_tensor",
    "torch.stack",
    "torch.cat",
    "torch.FloatTensor",
    "torch.LongTensor",
    "numpy.array",
    "numpy.asarray",
    "numpy.stack",
)


def _collected_item(name: str, use: cst.CSTNode, ctx: Context) -> str | None:
    """``x`` when ``name`` is a list filled by ``name.append(x)`` in a ``for`` loop that
    ends before ``use`` in the same function, ``x`` being a name that loop binds."""
    scope = ctx.enclosing_function(use)
    for call in ctx.nodes(cst.Call):
        if method_name(call) != "append" or ctx.enclosing_function(call) is not scope:  # type: ignore[arg-type]
            continue
        owner = receiver(call)  # type: ignore[arg-type]
        if not isinstance(owner, cst.Name) or owner.value != name or len(call.args) != 1:  # type: ignore[attr-defined]
            continue
        item = call.args[0].value  # type: ignore[attr-defined]
        loop = ctx.enclosing(call, cst.For)
        if not isinstance(item, cst.Name) or loop is None or not starts_before(loop, use, ctx):
            continue
        if ctx.within(loop, use):
            return None  # the batch is built inside the same loop
        bound = set(bound_names(loop.target))  # type: ignore[attr-defined]
        for target in ctx.nodes_within(loop.body, cst.AssignTarget):  # type: ignore[attr-defined]
            bound.update(bound_names(target.target))  # type: ignore[attr-defined]
        return item.value if item.value in bound else None
    return None


class LastItemInsteadOfList(Swap):
    """Build a batch from the loop's last item instead of the list the loop collected:
    ``torch.tensor(s_prime_lst)`` -> ``torch.tensor(s_prime)``.

    Bug: after a loop that appends each item to a list, the batch is made from the loop
    variable (the last item) instead of the list, a one-character slip between two names
    that differ by a suffix. Real fix: seungeunrho/minimalRL@cabbd84 (actor-critic's batch
    of next states was ``torch.tensor(s_prime)``, the last transition's state). Impact:
    the tensor has one item where a batch was meant; where it still broadcasts (a value
    of shape (1,) against the batch's (n, 1)) every sample silently gets the last item's
    value: a TD target built on one state, labels all equal to the last one; the loss
    keeps falling towards a wrong target. Fix: build the batch from the list. Check:
    assert every batch tensor has the batch size as its first dimension.
    """

    name = "last_item_instead_of_list"
    category = "data"
    summary = "A batch built from the loop's last item instead of the collected list."
    expected = "degrades"
    witness = (
        "differs train_inputs|eval_inputs|first_batch",
        "the forwards see one item, not the collected batch",
    )
    crashes = ("shape", "size", "dimension")
    node_types = (cst.Arg,)
    contexts = TRAINING_CONTEXTS
    examples = (
        Example(
            before="""
                import torch
                def make_batch(data):
                    s_lst, s_prime_lst = [], []
                    for transition in data:
                        s, a, r, s_prime, done = transition
                        s_lst.append(torch.from_numpy(s))
                        s_prime_lst.append(s_prime)
                    return torch.stack(s_lst), torch.tensor(s_prime_lst, dtype=torch.float)
            """,
            after="""
                import torch
                def make_batch(data):
                    s_lst, s_prime_lst = [], []
                    for transition in data:
                        s, a, r, s_prime, done = transition
                        s_lst.append(torch.from_numpy(s))
                        s_prime_lst.append(s_prime)
                    return torch.stack(s_lst), torch.tensor(s_prime, dtype=torch.float)
            """,
        ),
    )
    non_examples = (
        # Items appended as built expressions: no loop variable to confuse.
        """
            import torch
            rewards = []
            for r in raw:
                rewards.append([r / 100.0])
            batch = torch.tensor(rewards)
        """,
        # Batched inside the loop: the list is what the loop sees so far.
        """
            import torch
            xs = []
            for x in items:
                xs.append(x)
                batch = torch.stack(xs)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Arg)
        call = ctx.parent(node)
        if not isinstance(call, cst.Call) or node.keyword is not None or call.args[0] is not node:
            return None
        if not isinstance(node.value, cst.Name):
            return None
        if not resolve(call.func, ctx, strict=False).matches(_BATCHERS):
            return None
        item = _collected_item(node.value.value, node, ctx)
        return node.with_changes(value=cst.Name(item)) if item is not None else None
