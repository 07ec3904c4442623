"""The witness probe of the loaders' order (probes.py): how many ``DataLoader`` iterations
drew their samples in a shuffled order.

A loader shuffles when its sampler is a ``RandomSampler`` (``shuffle=True``), a
``SubsetRandomSampler`` or ``WeightedRandomSampler``, or a ``DistributedSampler`` with
``shuffle`` on; a sampler of another class is left out (unknown is not "unshuffled"). The
count (``shuffled_loaders``) is what ``no_shuffle``'s witness compares besides the batches
a training forward saw: a test that only reads the loader (``check_loader_shuffles``) runs
no forward, and its loader's order is still the bug's mechanism.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from torch.utils import data

from experiments.harness.probes import Probes

_SHUFFLING = (data.RandomSampler, data.SubsetRandomSampler, data.WeightedRandomSampler)


def shuffles(loader: Any) -> bool | None:
    """Whether ``loader`` draws in a shuffled order; None for a sampler it cannot tell."""
    sampler = getattr(loader, "sampler", None)
    batch_sampler = getattr(loader, "batch_sampler", None)
    if isinstance(batch_sampler, data.BatchSampler):
        sampler = batch_sampler.sampler
    elif batch_sampler is not None:  # a batch sampler of its own: its order is its own
        return None
    if isinstance(sampler, _SHUFFLING):
        return True
    if isinstance(sampler, data.SequentialSampler):
        return False
    if isinstance(sampler, data.distributed.DistributedSampler):
        return bool(sampler.shuffle)
    return None


def install(probes: Probes, patch: Callable[[Any, str, Any], None]) -> None:
    original = data.DataLoader.__iter__

    @wraps(original)
    def iterate(self: Any) -> Any:
        if shuffles(self):
            probes.counts["shuffled_loaders"] += 1
            probes.dirty = True
        return original(self)

    patch(data.DataLoader, "__iter__", iterate)
