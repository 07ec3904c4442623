"""The interview round's loop, written correctly: digits, an MLP with dropout, Adam.

It is the loop the classic five bugs (``interactions.CLASSIC``) are injected into by the
real operators. Unlike ``reference_loops/mlp_digits.py`` the validation pass computes only
accuracy, so the loss change (MSE for cross-entropy) and the missing ``no_grad`` touch
different statements and all five bugs fit in one script together.

Run: ``python experiments/quiz/classic_loop.py --epochs 10 --seed 0 --device cpu``
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
except ImportError:  # run without trainwreck: metrics go nowhere

    def report(**metrics: float) -> None:
        pass


NUM_CLASSES = 10


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, NUM_CLASSES)
        self.dropout = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


def make_loaders(g: torch.Generator) -> tuple[DataLoader, DataLoader]:
    data = load_digits()
    X = torch.tensor(data.data, dtype=torch.float32) / 16.0
    y = torch.tensor(data.target, dtype=torch.long)
    perm = torch.randperm(len(X), generator=g)
    n_train = int(0.8 * len(X))
    train_idx, val_idx = perm[:n_train], perm[n_train:]
    train_loader = DataLoader(
        TensorDataset(X[train_idx], y[train_idx]), batch_size=64, shuffle=True, generator=g
    )
    val_loader = DataLoader(TensorDataset(X[val_idx], y[val_idx]), batch_size=256)
    return train_loader, val_loader


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="digits MLP, the interview round's loop")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    device = torch.device(args.device)

    train_loader, val_loader = make_loaders(g)
    model = MLP().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

    for epoch in range(1, args.epochs + 1):
        model.train()
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()

        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in val_loader:
                x, y = x.to(device), y.to(device)
                correct += (model(x).argmax(dim=1) == y).sum().item()
        accuracy = correct / len(val_loader.dataset)
        report(epoch=epoch, val_metric=accuracy)
        print(f"epoch {epoch:3d}  loss {loss.item():.4f}  val acc {accuracy:.3f}")


if __name__ == "__main__":
    main()
