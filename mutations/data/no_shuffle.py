"""The ``no_shuffle`` operator (NoShuffle)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    closed_args,
    find_arg,
    is_data_loader,
    is_training_loader,
    is_true,
    resolve,
    shuffle_true,
    training_loader_setting,
    with_arg_value,
    with_keyword,
)
from mutator.semantics.data import forwarded_loader_argument


class NoShuffle(Swap):
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
    witness = (
        "differs train_inputs|shuffled_loaders",
        "the training batches come in another (unshuffled) order",
    )
    claims = frozenset({"training_loader"})
    node_types = (cst.Call, cst.DictElement)
    examples = (
        # Under DDP the sampler shuffles (issue 29).
        Example(
            before="""
                from torch.utils.data import DataLoader, DistributedSampler
                train_loader = DataLoader(train_ds, batch_size=2, shuffle=False, sampler=DistributedSampler(train_ds))
            """,
            after="""
                from torch.utils.data import DataLoader, DistributedSampler
                train_loader = DataLoader(train_ds, batch_size=2, shuffle=False, sampler=DistributedSampler(train_ds, shuffle=False))
            """,
        ),
        # A kwargs dict the training DataLoader unpacks.
        Example(
            before="""
                from torch.utils.data import DataLoader
                train_kwargs = {"batch_size": 64, "shuffle": True}
                train_loader = DataLoader(train_ds, **train_kwargs)
            """,
            after="""
                from torch.utils.data import DataLoader
                train_kwargs = {"batch_size": 64, "shuffle": False}
                train_loader = DataLoader(train_ds, **train_kwargs)
            """,
        ),
        # A helper of the script builds the loader with the caller's keyword (issue 29).
        Example(
            before="""
                from torch.utils.data import DataLoader
                def make_loader(dataset, batch_size, shuffle=False):
                    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle)
                train_loader = make_loader(train_set, 32, shuffle=True)
                val_loader = make_loader(val_set, 64)
            """,
            after="""
                from torch.utils.data import DataLoader
                def make_loader(dataset, batch_size, shuffle=False):
                    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle)
                train_loader = make_loader(train_set, 32, shuffle=False)
                val_loader = make_loader(val_set, 64)
            """,
        ),
        # Options unpacked from a dict literal (framework-style code, issue 29).
        Example(
            before="""
                from torch.utils.data import DataLoader
                loader = DataLoader(train_ds, **{"batch_size": 64, "shuffle": True})
            """,
            after="""
                from torch.utils.data import DataLoader
                loader = DataLoader(train_ds, **{"batch_size": 64, "shuffle": False})
            """,
        ),
        Example(
            before="train_loader = DataLoader(train_ds, batch_size=64, shuffle=True, generator=g)\n",
            after="train_loader = DataLoader(train_ds, batch_size=64, shuffle=False, generator=g)\n",
        ),
        Example(
            before="""
                import torch
                for epoch in range(3):
                    order = torch.randperm(n_train, generator=g)
            """,
            after="""
                import torch
                for epoch in range(3):
                    order = torch.arange(n_train)
            """,
        ),
    )
    non_examples = (
        "val_loader = DataLoader(val_ds, batch_size=256, shuffle=True)\n",
        "loader = DataLoader(ds, batch_size=64)\n",
        """
            import torch
            perm = torch.randperm(n, generator=g)
        """,  # the split, not an epoch order
        # A random mini-batch, not an ordering: arange would train on one batch only.
        """
            import torch
            for step in range(9):
                idx = torch.randperm(n)[:64]
        """,
    )

    def _epoch_permutation(self, node: cst.Call, ctx: Context) -> bool:
        if not (
            isinstance(node.func, cst.Attribute)
            and resolve(node, ctx, strict=False).matches(("torch.randperm",))
            and ctx.enclosing(node, (cst.For, cst.While)) is not None
        ):
            return False
        return not isinstance(ctx.parent(node), cst.Subscript)

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if isinstance(node, cst.DictElement):  # ``train_kwargs = {"shuffle": True}``
            if is_true(node.value) and node in training_loader_setting(ctx, "shuffle"):
                return node.with_changes(value=cst.Name("False"))
            return None
        if is_data_loader(node, ctx):
            shuffle = shuffle_true(node)
            if not is_training_loader(node, ctx):
                return None
            if shuffle is None:
                return _sampler_unshuffled(node, ctx)
            return with_arg_value(node, shuffle, cst.Name("False"))
        # ``make_loader(train_set, 32, shuffle=True)``: the helper hands it on (issue 29).
        forwarded = forwarded_loader_argument(node, "shuffle", ctx)
        if forwarded is not None:
            if not is_true(forwarded.value) or not is_training_loader(node, ctx):
                return None
            return with_arg_value(node, forwarded, cst.Name("False"))  # type: ignore[arg-type]
        if not isinstance(node, cst.Call) or not self._epoch_permutation(node, ctx):
            return None
        args = closed_args(
            [a for a in node.args if a.keyword is None or a.keyword.value != "generator"]
        )
        return node.with_changes(func=node.func.with_changes(attr=cst.Name("arange")), args=args)


_SHUFFLING_SAMPLERS = (
    "torch.utils.data.DistributedSampler",
    "torch.utils.data.distributed.DistributedSampler",
)


def _sampler_unshuffled(loader: cst.Call, ctx: Context) -> cst.Call | None:
    """``DataLoader(ds, sampler=DistributedSampler(ds))``: the sampler shuffles by default
    (issue 29: a DDP script), so the training order is fixed there."""
    sampler = find_arg(loader, "sampler")
    built = sampler.value if sampler is not None else None
    if not (
        isinstance(built, cst.Call)
        and resolve(built, ctx, strict=False).matches(_SHUFFLING_SAMPLERS)
    ):
        return None
    if find_arg(built, "shuffle") is not None:
        return None  # set by the script: ``shuffle=True`` is rare, ``False`` is no site
    unshuffled = with_keyword(built, "shuffle", cst.Name("False"))
    return with_arg_value(loader, sampler, unshuffled)  # type: ignore[arg-type]
