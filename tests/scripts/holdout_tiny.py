"""Held-out evaluations for tests/scripts/train_tiny.py, imported by the harness only
(kept beside the script: a run puts the script's folder first on sys.path)."""

from __future__ import annotations

import torch
from torch import nn


def accuracy(model: nn.Module, *, seed: int, device: str) -> dict[str, float]:
    generator = torch.Generator().manual_seed(10_000 + seed)  # fresh points, same rule
    inputs = torch.randn(512, 8, generator=generator)
    labels = (inputs[:, 0] + inputs[:, 1] > 0).long()
    model.eval()
    with torch.no_grad():
        logits = model(inputs.to(device))
    return {
        "metric": float((logits.argmax(dim=1) == labels).float().mean()),
        "loss": float(nn.functional.cross_entropy(logits, labels)),
        # The whole Sequential, not one of its layers, must be handed over.
        "chance": 0.5 if len(list(model.parameters())) == 4 else -1.0,
    }


def broken(model: nn.Module, *, seed: int, device: str) -> dict[str, float]:
    raise ValueError("this evaluation does not fit the model")
