"""Warm the parent once so that every forked run starts at its first step, not 9 s later.

A fresh interpreter pays ~3 s for ``import torch``, ~2.5 s for scikit-learn and ~2.5 s
for the lazy ``torch._dynamo`` import that the first optimizer construction triggers.
The parent pays all three once; a forked child inherits them. The parent keeps torch at
one thread and never runs a parallel op or touches CUDA: forking a process whose OpenMP
pool or CUDA context exists leaves the child with a broken copy of it.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys

_warmed = False
PRELOAD = (
    "numpy",
    "torch.nn.functional",
    "torch.utils.data",
    "sklearn.datasets",
    "sklearn.model_selection",
    "sklearn.preprocessing",
    "experiments.harness.hooks",
    "experiments.harness.writer",
    "experiments.harness.child",
    # What every run imports after the fork: imported there, each run would pay for it
    # again (compiling the source too where no bytecode cache may be written).
    "experiments.harness.project",
    "experiments.harness.forwards",
    "experiments.harness.reuse",  # a run process that may serve several runs
    # Lazy imports of sklearn's bundled data sets and of torch.save/torch.load.
    "sklearn.datasets.data",
    "sklearn.datasets.descr",
    "torch.utils.serialization",
)


def warm_up() -> None:
    global _warmed
    if _warmed:
        return
    import torch

    torch.set_num_threads(1)
    for name in PRELOAD:
        with contextlib.suppress(ImportError):  # scikit-learn is optional for user scripts
            importlib.import_module(name)
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=0.1)  # triggers the lazy dynamo import
    parameter.grad = torch.zeros(1)
    optimizer.step()
    torch.optim.Adam([parameter]).step()
    # Objects alive now are shared with every child: keep the collector from touching
    # (and so copying) their pages in each child.
    gc.collect()
    gc.freeze()
    _warmed = True


def fork_is_safe() -> bool:
    """Fork only on Linux and only while CUDA is uninitialised in this process."""
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return False
    torch = sys.modules.get("torch")
    return not (torch is not None and torch.cuda.is_initialized())
