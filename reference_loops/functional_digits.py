"""Handwritten digits with the functional API: ``F.log_softmax`` + ``F.nll_loss``.

Task: classify scikit-learn's ``load_digits`` (64 pixels) into 10 classes, 80/20 split.
Model: MLP 64 -> 128 -> 10 written with ``torch.nn.functional`` (``F.relu``, ``F.dropout``
with ``training=self.training``); a custom ``Dataset`` subclass; SGD with momentum and a
cosine LR schedule stepped once per epoch; the loss is ``F.nll_loss`` on
``F.log_softmax`` outputs; the evaluation function is decorated with ``@torch.no_grad()``.
Expected initial loss: ln 10 = 2.303 (balanced classes, small logits at init).
Target: val accuracy >= 0.95.
Default budget: 15 epochs, batch 32, lr 0.02 (about 0.4 s on one CPU thread).

Run: ``python reference_loops/functional_digits.py --epochs 15 --seed 0 --device cpu``
"""

from __future__ import annotations

import argparse
import random

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, Dataset

try:
    from experiments.telemetry import report
except ImportError:  # running without trainwreck installed: metrics go nowhere

    def report(**metrics: float) -> None:
        pass


EPOCHS = 15
BATCH_SIZE = 32
LR = 0.02
MOMENTUM = 0.9
VAL_FRACTION = 0.2


class DigitsDataset(Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x = x
        self.y = y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[idx], self.y[idx]


class Net(nn.Module):
    def __init__(self, in_features: int = 64, hidden: int = 128, num_classes: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.fc1(x))
        x = F.dropout(x, p=0.1, training=self.training)
        return self.fc2(x)


def make_loaders(batch_size: int, g: torch.Generator) -> tuple[DataLoader, DataLoader]:
    data = load_digits()
    X = torch.tensor(data.data, dtype=torch.float32)
    y = torch.tensor(data.target, dtype=torch.long)
    n = len(X)
    n_train = int(n * (1 - VAL_FRACTION))
    perm = torch.randperm(n, generator=g)
    train_idx, val_idx = perm[:n_train], perm[n_train:]
    X_train, y_train = X[train_idx], y[train_idx]
    X_val, y_val = X[val_idx], y[val_idx]
    # One scalar mean/std: a few border pixels are always 0, so per-pixel stats would divide by ~0.
    mean, std = X_train.mean(), X_train.std()
    X_train = (X_train - mean) / std
    X_val = (X_val - mean) / std
    train_ds = DigitsDataset(X_train, y_train)
    val_ds = DigitsDataset(X_val, y_val)
    train_loader = DataLoader(train_ds, batch_size=batch_size, shuffle=True, generator=g)
    val_loader = DataLoader(val_ds, batch_size=256, shuffle=False)
    return train_loader, val_loader


def train_one_epoch(
    model: nn.Module,
    loader: DataLoader,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
) -> float:
    model.train()
    total_loss = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        logits = model(x)
        log_probs = F.log_softmax(logits, dim=1)
        loss = F.nll_loss(log_probs, y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * x.size(0)
    return total_loss / len(loader.dataset)


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> tuple[float, float]:
    model.eval()
    total_loss, correct = 0.0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        log_probs = F.log_softmax(model(x), dim=1)
        total_loss += F.nll_loss(log_probs, y, reduction="sum").item()
        correct += (log_probs.argmax(dim=1) == y).sum().item()
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
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=MOMENTUM)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    for epoch in range(1, args.epochs + 1):
        train_loss = train_one_epoch(model, train_loader, optimizer, device)
        scheduler.step()
        val_loss, val_acc = evaluate(model, val_loader, device)
        report(epoch=epoch, train_loss=train_loss, val_loss=val_loss, val_metric=val_acc)
        print(f"epoch {epoch:3d}  train {train_loss:.4f}  val {val_loss:.4f}  acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
