"""Handwritten digits as 1x8x8 images with a small CNN (BatchNorm, SGD + momentum, StepLR).

Task: classify scikit-learn's ``load_digits`` images into 10 classes, 80/20 train/val split.
Model: two conv blocks (Conv3x3 -> BatchNorm2d -> ReLU -> MaxPool) and a linear head on the
flattened features; Kaiming init for the convolutions; SGD with momentum 0.9 and a StepLR
schedule stepped once per epoch; ``nn.CrossEntropyLoss``.
Expected initial loss: ln 10 = 2.303 (balanced classes; the head starts with small logits).
Target: val accuracy >= 0.95.
Default budget: 12 epochs, batch 64, lr 0.02 (about 1 s on one CPU thread).

Run: ``python reference_loops/cnn_digits.py --epochs 12 --seed 0 --device cpu``
"""

from __future__ import annotations

import argparse
import random

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

try:
    from experiments.telemetry import report
except ImportError:  # running without trainwreck installed: metrics go nowhere

    def report(**metrics: float) -> None:
        pass


EPOCHS = 12
BATCH_SIZE = 64
LR = 0.02
MOMENTUM = 0.9
LR_STEP_EPOCHS = 4
LR_GAMMA = 0.5
VAL_FRACTION = 0.2
NUM_CLASSES = 10


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int = NUM_CLASSES):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 4x4 -> 2x2
        )
        self.head = nn.Linear(32 * 2 * 2, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.zeros_(m.bias)
        # A small head keeps the initial logits near zero, so the loss starts at ln C.
        nn.init.normal_(self.head.weight, std=0.01)
        nn.init.zeros_(self.head.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = x.view(x.size(0), -1)
        return self.head(x)


def make_loaders(batch_size: int, g: torch.Generator) -> tuple[DataLoader, DataLoader]:
    data = load_digits()
    X = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1)  # (n, 1, 8, 8)
    y = torch.tensor(data.target, dtype=torch.long)
    n = len(X)
    n_train = int(n * (1 - VAL_FRACTION))
    perm = torch.randperm(n, generator=g)
    train_idx, val_idx = perm[:n_train], perm[n_train:]
    X_train, y_train = X[train_idx], y[train_idx]
    X_val, y_val = X[val_idx], y[val_idx]
    # One mean and std over all training pixels: images share a scale.
    mean, std = X_train.mean(), X_train.std()
    X_train = (X_train - mean) / std
    X_val = (X_val - mean) / std
    train_loader = DataLoader(
        TensorDataset(X_train, y_train), batch_size=batch_size, shuffle=True, generator=g
    )
    val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=256, shuffle=False)
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
    model = SmallCNN().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=MOMENTUM)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=LR_STEP_EPOCHS, gamma=LR_GAMMA)

    for epoch in range(1, args.epochs + 1):
        train_loss = train_one_epoch(model, train_loader, criterion, optimizer, device)
        scheduler.step()
        val_loss, val_acc = evaluate(model, val_loader, criterion, device)
        report(epoch=epoch, train_loss=train_loss, val_loss=val_loss, val_metric=val_acc)
        print(f"epoch {epoch:3d}  train {train_loss:.4f}  val {val_loss:.4f}  acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
