"""Held-out evaluations of the tabular loops (breast cancer, diabetes)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from sklearn.datasets import load_breast_cancer, load_diabetes
from torch import nn


def _perm(n: int, seed: int) -> torch.Tensor:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))


def cancer_test_split(model: nn.Module, *, seed: int, device: str) -> dict[str, float]:
    """binary_cancer: the 20% test split the loop never trains or selects on (60/20/20)."""
    data = load_breast_cancer()
    X = torch.tensor(data.data, dtype=torch.float32)
    y = torch.tensor(data.target, dtype=torch.float32)
    n = len(X)
    n_val, n_test = int(n * 0.2), int(n * 0.2)
    perm = _perm(n, seed)
    train_idx, test_idx = perm[: n - n_val - n_test], perm[-n_test:]
    mean, std = X[train_idx].mean(0), X[train_idx].std(0) + 1e-8
    model.eval()
    with torch.no_grad():
        logits = model(((X[test_idx] - mean) / std).to(device)).float().cpu().reshape(-1)
    target = y[test_idx]
    majority = float(max(target.mean(), 1 - target.mean()))
    return {
        "metric": float(((logits > 0).float() == target).float().mean()),
        "loss": float(F.binary_cross_entropy_with_logits(logits, target)),
        "chance": majority,
    }


def diabetes_val_split(model: nn.Module, *, seed: int, device: str) -> dict[str, float]:
    """regression_diabetes: R^2 on the seed's 20% val split, standardized as the loop does."""
    data = load_diabetes()
    X = torch.tensor(data.data, dtype=torch.float32)
    y = torch.tensor(data.target, dtype=torch.float32)
    n_train = int(len(X) * 0.8)
    perm = _perm(len(X), seed)
    train_idx, val_idx = perm[:n_train], perm[n_train:]
    mean, std = X[train_idx].mean(0), X[train_idx].std(0) + 1e-8
    y_mean, y_std = y[train_idx].mean(), y[train_idx].std()
    target = (y[val_idx] - y_mean) / y_std
    model.eval()
    with torch.no_grad():
        pred = model(((X[val_idx] - mean) / std).to(device)).float().cpu().reshape(-1)
    squared_error = float(((pred - target) ** 2).sum())
    return {
        "metric": 1.0 - squared_error / float(((target - target.mean()) ** 2).sum()),
        "loss": squared_error / len(target),
        "chance": 0.0,  # predicting the mean
    }
