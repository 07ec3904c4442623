"""Breast-cancer diagnosis (binary) with an MLP, ``BCEWithLogitsLoss`` and a Trainer class.

Task: scikit-learn's ``load_breast_cancer`` (569 samples, 30 features, 212 malignant /
357 benign), 60/20/20 train/val/test split, features standardized with training statistics.
Model: MLP 30 -> 32 -> 1 (one logit), Dropout, Adam; the training step lives in a small
``Trainer`` class (``self.model``, ``self.optimizer``, ``self.criterion``). The weights of the
epoch with the best val loss are kept (a deep copy of the state dict), restored after
training and scored once on the test split: ``report(test_loss=..., test_metric=...)``.
Expected initial loss: ln 2 = 0.693 (logits near zero give p = 0.5 for every sample).
Target: val accuracy >= 0.95; test accuracy of the restored best weights >= 0.95.
Default budget: 30 epochs, batch 32, lr 1e-3 (about 0.3 s on one CPU thread).

Run: ``python reference_loops/binary_cancer.py --epochs 30 --seed 0 --device cpu``
"""

from __future__ import annotations

import argparse
import copy
import math
import random

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

try:
    from experiments.telemetry import report
except ImportError:  # running without trainwreck installed: metrics go nowhere

    def report(**metrics: float) -> None:
        pass


EPOCHS = 30
BATCH_SIZE = 32
LR = 1e-3
VAL_FRACTION = 0.2
TEST_FRACTION = 0.2


class Classifier(nn.Module):
    def __init__(self, in_features: int = 30, hidden: int = 32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.ReLU(),
            nn.Dropout(0.2),
            nn.Linear(hidden, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # (n, 1) logits


class Trainer:
    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        criterion: nn.Module,
        device: torch.device,
    ):
        self.model = model
        self.optimizer = optimizer
        self.criterion = criterion
        self.device = device

    def train_one_epoch(self, loader: DataLoader) -> float:
        self.model.train()
        total_loss = 0.0
        for x, y in loader:
            x, y = x.to(self.device), y.to(self.device)
            self.optimizer.zero_grad()
            logits = self.model(x).squeeze(1)  # (n,) to match the float targets
            loss = self.criterion(logits, y)
            loss.backward()
            self.optimizer.step()
            total_loss += loss.item() * x.size(0)
        return total_loss / len(loader.dataset)

    def evaluate(self, loader: DataLoader) -> tuple[float, float]:
        self.model.eval()
        total_loss, correct = 0.0, 0
        with torch.no_grad():
            for x, y in loader:
                x, y = x.to(self.device), y.to(self.device)
                logits = self.model(x).squeeze(1)
                total_loss += self.criterion(logits, y).item() * x.size(0)
                correct += ((logits > 0).float() == y).sum().item()
        n = len(loader.dataset)
        return total_loss / n, correct / n


def make_loaders(batch_size: int, g: torch.Generator) -> tuple[DataLoader, DataLoader, DataLoader]:
    data = load_breast_cancer()
    X = torch.tensor(data.data, dtype=torch.float32)
    y = torch.tensor(data.target, dtype=torch.float32)  # BCE wants float targets in {0, 1}
    n = len(X)
    n_val, n_test = int(n * VAL_FRACTION), int(n * TEST_FRACTION)
    n_train = n - n_val - n_test
    perm = torch.randperm(n, generator=g)
    train_idx, val_idx, test_idx = perm[:n_train], perm[n_train:-n_test], perm[-n_test:]
    X_train, y_train = X[train_idx], y[train_idx]
    X_val, y_val = X[val_idx], y[val_idx]
    X_test, y_test = X[test_idx], y[test_idx]
    mean, std = X_train.mean(0), X_train.std(0) + 1e-8
    X_train = (X_train - mean) / std
    X_val = (X_val - mean) / std
    X_test = (X_test - mean) / std
    train_ds = TensorDataset(X_train, y_train)
    train_loader = DataLoader(train_ds, batch_size=batch_size, shuffle=True, generator=g)
    val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=256, shuffle=False)
    test_loader = DataLoader(TensorDataset(X_test, y_test), batch_size=256, shuffle=False)
    return train_loader, val_loader, test_loader


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--lr", type=float, default=LR)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    device = torch.device(args.device)

    train_loader, val_loader, test_loader = make_loaders(args.batch_size, g)
    model = Classifier().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    trainer = Trainer(model, optimizer, nn.BCEWithLogitsLoss(), device)

    best_val_loss, best_state = math.inf, copy.deepcopy(model.state_dict())
    for epoch in range(1, args.epochs + 1):
        train_loss = trainer.train_one_epoch(train_loader)
        val_loss, val_acc = trainer.evaluate(val_loader)
        report(epoch=epoch, train_loss=train_loss, val_loss=val_loss, val_metric=val_acc)
        print(f"epoch {epoch:3d}  train {train_loss:.4f}  val {val_loss:.4f}  acc {val_acc:.3f}")
        if val_loss < best_val_loss:
            best_val_loss = val_loss
            best_state = copy.deepcopy(model.state_dict())

    # Score the best epoch's weights, not the last ones, on data that chose nothing.
    model.load_state_dict(best_state)
    test_loss, test_acc = trainer.evaluate(test_loader)
    report(test_loss=test_loss, test_metric=test_acc)
    print(f"best val loss {best_val_loss:.4f}  test {test_loss:.4f}  acc {test_acc:.3f}")


if __name__ == "__main__":
    main()
