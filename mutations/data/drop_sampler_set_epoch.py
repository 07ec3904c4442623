"""The ``drop_sampler_set_epoch`` operator (DropSamplerSetEpoch)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    assigned_values,
    callee_name,
    dotted_name,
    expression_call,
    find_arg,
    is_false,
    keyword_string,
    method_name,
    receiver,
)


class DropSamplerSetEpoch(Swap):
    """Delete ``sampler.set_epoch(epoch)`` from the epoch loop.

    Bug: a ``DistributedSampler`` (or any sampler seeded per epoch) is never told the epoch.
    Its permutation is drawn from ``seed + epoch``, so without ``set_epoch`` every epoch
    visits the samples in the same order (and each rank the same shard). Impact: no
    error and training still works, but the data order is fixed: the loss curve shows the
    same within-epoch pattern every epoch and generalisation is somewhat worse, like
    training without shuffling after the first epoch. Fix: call
    ``sampler.set_epoch(epoch)`` at the start of every epoch, before iterating the loader.
    A call under a ``store_true`` flag that is off by default (``if args.distributed:``) is
    not a site: the default run never executes it. Check: log the first few indices of each epoch: they must differ between epochs.
    """

    name = "drop_sampler_set_epoch"
    category = "data"
    summary = "Remove sampler.set_epoch(epoch): every epoch reuses the same shuffled order."
    expected = "silent"
    witness = "differs train_inputs", "the training batches differ (an epoch repeats the order)"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                for epoch in range(args.epochs):
                    train_sampler.set_epoch(epoch)
                    train(train_loader, model, optimizer)
            """,
            after="""
                for epoch in range(args.epochs):
                    train(train_loader, model, optimizer)
            """,
        ),
        Example(
            before="""
                for epoch in range(start_epoch, epochs):
                    train_loader.sampler.set_epoch(epoch)
            """,
            after="""
                for epoch in range(start_epoch, epochs):
                    pass
            """,
        ),
    )
    non_examples = (
        # Only with --distributed: the default run never calls it.
        """
            parser.add_argument("--distributed", action="store_true")
            for epoch in range(args.epochs):
                if args.distributed:
                    train_sampler.set_epoch(epoch)
        """,
        # Not a sampler: another object's method of the same name.
        "tracker.set_epoch(epoch)\n",
        "sampler = DistributedSampler(dataset)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        call = expression_call(node)
        if call is None or method_name(call) != "set_epoch" or len(call.args) != 1:
            return None
        if not _is_sampler(receiver(call), ctx) or _behind_flag_off_by_default(node, ctx):
            return None
        return cst.RemoveFromParent()


def _behind_flag_off_by_default(statement: cst.CSTNode, ctx: Context) -> bool:
    """Is ``statement`` inside ``if args.distributed:`` where ``--distributed`` is a
    ``store_true`` flag? Then a default run never executes it: no bug lands there."""
    for ancestor in ctx.ancestors(statement):
        if not isinstance(ancestor, cst.If) or not isinstance(ancestor.test, cst.Attribute):
            continue
        flag = ancestor.test.attr.value
        for call in ctx.nodes(cst.Call):
            if method_name(call) != "add_argument" or not call.args:  # type: ignore[arg-type]
                continue
            option = call.args[0].value  # type: ignore[attr-defined]
            if not isinstance(option, cst.SimpleString):
                continue
            if str(option.evaluated_value).lstrip("-").replace("-", "_") != flag:
                continue
            action = keyword_string(call, "action")  # type: ignore[arg-type]
            default = find_arg(call, "default")  # type: ignore[arg-type]
            if action == "store_true" and (default is None or is_false(default.value)):
                return True
    return False


def _is_sampler(expr: cst.BaseExpression, ctx: Context) -> bool:
    """``train_sampler``, ``loader.sampler``, or a name bound to a ``...Sampler(...)``."""
    dotted = dotted_name(expr)
    if dotted is None:
        return False
    if "sampler" in dotted.rsplit(".", 1)[-1].lower():
        return True
    return any(
        isinstance(value, cst.Call) and (callee_name(value) or "").endswith("Sampler")
        for value in assigned_values(ctx, dotted)
    )
