"""The training loader shuffles: each epoch sees the samples in a new order."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from typing import Any

from experiments.checks._common import fail, same_values, seeded


def check_loader_shuffles(loader: Iterable[Any], *, batches: int = 2, seed: int = 0) -> None:
    """Two passes over ``loader`` (two epochs) start with different batches: the first
    ``batches`` batches of each are compared. Runs under ``seed`` (a loader drawing its
    order from the global generator gets a fixed one) and gives the caller's RNG back.
    Catches: ``shuffle=False`` (or no sampler that shuffles) on the training loader, a
    sampler seeded anew every epoch. Cannot catch: a shuffle that keeps related samples
    together (sorted by length, then shuffled in buckets), the validation loader's order
    (which should not shuffle)."""
    __tracebackhide__ = True
    with seeded(seed):
        first = list(islice(iter(loader), batches))
        second = list(islice(iter(loader), batches))
    if not first:
        raise ValueError("check_loader_shuffles: the loader yields no batch")
    if same_values(first, second):
        raise fail(
            "check_loader_shuffles",
            f"two epochs to start with different batches (the first {len(first)} compared)",
            "the same batches in the same order",
            "The training loader does not shuffle: pass shuffle=True (or a sampler that "
            "shuffles), and do not reseed its generator every epoch.",
        )
