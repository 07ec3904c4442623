"""Small correct and buggy training setups for the checks' own tests.

Each bug is built directly (a model, a loss or a step written wrong on purpose), so a
check's test says exactly which bug it must see. The task is learnable and tiny: four
Gaussian blobs in 8 standardized features, so every setup runs in milliseconds on CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

N_CLASSES = 4
N_FEATURES = 8


def blobs(n: int = 128, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, class labels): four well-separated clusters, inputs standardized."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(N_CLASSES, N_FEATURES, generator=g) * 2
    y = torch.arange(n) % N_CLASSES
    x = centers[y] + torch.randn(n, N_FEATURES, generator=g)
    perm = torch.randperm(n, generator=g)
    x, y = x[perm], y[perm]
    return (x - x.mean(0)) / x.std(0), y


def linear_targets(n: int = 128, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, float targets): a noisy linear function of standardized inputs."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, N_FEATURES, generator=g)
    w = torch.randn(N_FEATURES, generator=g)
    return x, x @ w + 0.1 * torch.randn(n, generator=g)


class MLP(nn.Module):
    """The correct model: Linear-ReLU-Dropout-Linear."""

    def __init__(self, hidden: int = 32):
        super().__init__()
        self.fc1 = nn.Linear(N_FEATURES, hidden)
        self.dropout = nn.Dropout(0.1)
        self.fc2 = nn.Linear(hidden, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class DetachedMLP(MLP):
    """Bug: the hidden activation is detached, so fc1 never gets a gradient."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x)).detach()))


class AlwaysDropoutMLP(MLP):
    """Bug: F.dropout without training=self.training stays on in eval mode."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.dropout(F.relu(self.fc1(x)), p=0.1))


class BatchMixingMLP(MLP):
    """Bug: the hidden batch is flattened with its axes swapped (a view where a
    transpose was meant): each output row is built from several samples."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(x))
        h = h.t().reshape(h.shape)
        return self.fc2(self.dropout(h))


class BatchNormNet(nn.Module):
    """A correct model with batch norm (it mixes samples in train mode, by design)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(N_FEATURES, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, N_CLASSES)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class TokenModel(nn.Module):
    """Token ids (batch, time) -> logits (batch, time, vocab); ``mix`` adds the batch mean."""

    def __init__(self, vocab: int = 12, mix: bool = False):
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.head = nn.Linear(16, vocab)
        self.mix = mix

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        h = self.embed(idx)
        if self.mix:  # the bug: a statistic over dim 0 leaks other samples into each one
            h = h + h.mean(dim=0, keepdim=True)
        return self.head(h)


def zero_init(model: nn.Module) -> nn.Module:
    """Bug: every parameter set to zero (symmetry never broken)."""
    for p in model.parameters():
        nn.init.zeros_(p)
    return model


def step_fn(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = F.cross_entropy,
    *,
    order: tuple[str, ...] = ("train", "zero_grad", "forward", "backward", "step"),
) -> Callable[[Any], float]:
    """A training step doing ``order``: leave a word out or move it to build a step bug."""

    def train_step(batch: Any) -> float:
        x, y = batch
        loss = None
        for part in order:
            if part == "train":
                model.train()
            elif part == "eval":
                model.eval()
            elif part == "zero_grad":
                optimizer.zero_grad()
            elif part == "forward":
                loss = loss_fn(model(x), y)
            elif part == "backward":
                loss.backward()
            elif part == "step":
                optimizer.step()
        return loss.item()

    return train_step


def adam(model: nn.Module, lr: float = 1e-2) -> torch.optim.Optimizer:
    return torch.optim.Adam(model.parameters(), lr=lr)


def fresh(cls: type[nn.Module] = MLP, seed: int = 0, **kwargs: Any) -> nn.Module:
    torch.manual_seed(seed)
    return cls(**kwargs)
