"""Held-out evaluation of the digits loops: the val split of the seed, rebuilt here.

``load_digits`` has 1797 images and the loops train on 80% of them, so the held-out set is
the loop's own 20% val split, drawn again from the seed exactly as the unmutated loop draws
it (the first ``randperm`` of a generator seeded with the seed) and preprocessed as the
unmutated loop does. A mutant that evaluates on the training data, in the wrong mode or
with the wrong loss reports wrong numbers; these stay right.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn

VAL_FRACTION = 0.2
NUM_CLASSES = 10


def _split(seed: int, images: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    data = load_digits()
    X = torch.tensor(data.images if images else data.data, dtype=torch.float32)
    if images:
        X = X.unsqueeze(1)  # (n, 1, 8, 8)
    y = torch.tensor(data.target, dtype=torch.long)
    n_train = int(len(X) * (1 - VAL_FRACTION))
    perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(seed))
    return X[perm[:n_train]], X[perm[n_train:]], y[perm[n_train:]]


def _score(model: nn.Module, X: torch.Tensor, y: torch.Tensor, device: str) -> dict[str, float]:
    model.eval()
    with torch.no_grad():
        logits = model(X.to(device)).float().cpu()
    return {
        "metric": float((logits.argmax(dim=1) == y).float().mean()),
        "loss": float(F.cross_entropy(logits, y)),
        "chance": 1.0 / NUM_CLASSES,
    }


def scaled_pixels(model: nn.Module, *, seed: int, device: str) -> dict[str, float]:
    """mlp_digits, resume_digits: flat pixels / 16."""
    _, X_val, y_val = _split(seed, images=False)
    return _score(model, X_val / 16.0, y_val, device)


def standardized_pixels(model: nn.Module, *, seed: int, device: str) -> dict[str, float]:
    """functional_digits: flat pixels, one mean/std of the training pixels."""
    X_train, X_val, y_val = _split(seed, images=False)
    return _score(model, (X_val - X_train.mean()) / X_train.std(), y_val, device)


def standardized_images(model: nn.Module, *, seed: int, device: str) -> dict[str, float]:
    """cnn_digits: (n, 1, 8, 8) images, one mean/std of the training pixels."""
    X_train, X_val, y_val = _split(seed, images=True)
    return _score(model, (X_val - X_train.mean()) / X_train.std(), y_val, device)
