"""Handwritten digits (8x8, 10 classes) with a two-hidden-layer MLP.

Task: classify scikit-learn's ``load_digits`` (1797 images, 64 pixels in 0..16) into 10
classes, 80/20 train/val split.
Model: MLP 64 -> 128 -> 64 -> 10 with ReLU and Dropout, Adam, ``nn.CrossEntropyLoss``.
Expected initial loss: ln 10 = 2.303 (small logits at init, balanced classes).
Target: val accuracy >= 0.95.
Default budget: 20 epochs, batch 64, lr 2e-3 (about 0.6 s on one CPU thread).

Run: ``python reference_loops/mlp_digits.py --epochs 20 --seed 0 --device cpu``
"""

from __future__ import annotations

import argparse
import random

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

try:
    from experiments.telemetry import report
except ImportError:  # running without trainwreck installed: metrics go nowhere

    def report(**metrics: float) -> None:
        pass


EPOCHS = 20
BATCH_SIZE = 64
LR = 2e-3
VAL_FRACTION = 0.2
NUM_CLASSES = 10


class MLP(nn.Module):
    def __init__(self, in_features: int = 64, hidden: int = 128, num_classes: int = NUM_CLASSES):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, hidden // 2)
        self.fc3 = nn.Linear(hidden // 2, num_classes)
        self.dropout = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.fc1(x))
        x = self.dropout(x)
        x = F.relu(self.fc2(x))
        x = self.dropout(x)
        return self.fc3(x)


def make_loaders(batch_size: int, g: torch.Generator) -> tuple[DataLoader, DataLoader]:
    data = load_digits()
    X = torch.tensor(data.data, dtype=torch.float32) / 16.0  # pixel values 0..16 -> 0..1
    y = torch.tensor(data.target, dtype=torch.long)
    n = len(X)
    n_train = int(n * (1 - VAL_FRACTION))
    perm = torch.randperm(n, generator=g)
    train_idx, val_idx = perm[:n_train], perm[n_train:]
    train_ds = TensorDataset(X[train_idx], y[train_idx])
    val_ds = TensorDataset(X[val_idx], y[val_idx])
    train_loader = DataLoader(train_ds, batch_size=batch_size, shuffle=True, generator=g)
    val_loader = DataLoader(val_ds, batch_size=256, shuffle=False)
    return train_loader, val_loader


def train_one_epoch(
    model: nn.Module,
    loader: DataLoader,
    criterion: nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
) -> float:
    model.train()
    total_loss = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        logits = model(x)
        loss = criterion(logits, y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * x.size(0)
    return total_loss / len(loader.dataset)


def evaluate(
    model: nn.Module, loader: DataLoader, criterion: nn.Module, device: torch.device
) -> tuple[float, float]:
    model.eval()
    total_loss, correct = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            total_loss += criterion(logits, y).item() * x.size(0)
            correct += (logits.argmax(dim=1) == y).sum().item()
    n = len(loader.dataset)
    return total_loss / n, correct / n


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

    train_loader, val_loader = make_loaders(args.batch_size, g)
    model = MLP().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(1, args.epochs + 1):
        train_loss = train_one_epoch(model, train_loader, criterion, optimizer, device)
        val_loss, val_acc = evaluate(model, val_loader, criterion, device)
        report(epoch=epoch, train_loss=train_loss, val_loss=val_loss, val_metric=val_acc)
        print(f"epoch {epoch:3d}  train {train_loss:.4f}  val {val_loss:.4f}  acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
