"""Diabetes progression (regression) with an MLP and ``MSELoss``, written flat inside main().

Task: scikit-learn's ``load_diabetes`` (442 patients, 10 features, a disease-progression
score), 80/20 train/val split; inputs AND targets standardized with training statistics.
Model: MLP 10 -> 32 -> 1 with ReLU and Dropout, SGD with momentum and weight decay, an ExponentialLR
schedule stepped once per epoch. Predictions are
(n, 1), so the targets are made (n, 1) too before ``MSELoss`` (a (n,) target would
broadcast to (n, n)). The loop is deliberately flat: no helper functions, no classes
besides the model.
Expected initial loss: about 1.0 (MSE of near-zero predictions against unit-variance
targets).
Target: val R^2 >= 0.4 averaged over seeds. One split's 88 val patients make R^2 noisy:
least squares on the same splits ranges from 0.3 to 0.58 (mean 0.46), and this loop tracks it.
Default budget: 30 epochs, batch 32, lr 0.003 (about 0.2 s on one CPU thread).

Run: ``python reference_loops/regression_diabetes.py --epochs 30 --seed 0 --device cpu``
"""

from __future__ import annotations

import argparse
import random

import numpy as np
import torch
from sklearn.datasets import load_diabetes
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

try:
    from experiments.telemetry import report
except ImportError:  # running without trainwreck installed: metrics go nowhere

    def report(**metrics: float) -> None:
        pass


EPOCHS = 30
BATCH_SIZE = 32
LR = 0.003
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-3
LR_GAMMA = 0.95
VAL_FRACTION = 0.2


class Regressor(nn.Module):
    def __init__(self, in_features: int = 10, hidden: int = 32):
        super().__init__()
        self.hidden = nn.Linear(in_features, hidden)
        self.dropout = nn.Dropout(0.1)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.hidden(x))
        return self.out(self.dropout(h))  # (n, 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--lr", type=float, default=LR)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    args = parser.parse_args(argv)

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    device = torch.device(args.device)

    data = load_diabetes()
    X = torch.tensor(data.data, dtype=torch.float32)
    y = torch.tensor(data.target, dtype=torch.float32)
    n = len(X)
    n_train = int(n * (1 - VAL_FRACTION))
    perm = torch.randperm(n, generator=g)
    train_idx, val_idx = perm[:n_train], perm[n_train:]
    X_train, y_train = X[train_idx], y[train_idx]
    X_val, y_val = X[val_idx], y[val_idx]
    mean, std = X_train.mean(0), X_train.std(0) + 1e-8
    X_train = (X_train - mean) / std
    X_val = (X_val - mean) / std
    y_mean, y_std = y_train.mean(), y_train.std()
    y_train = (y_train - y_mean) / y_std
    y_val = (y_val - y_mean) / y_std

    train_ds = TensorDataset(X_train, y_train)
    val_ds = TensorDataset(X_val, y_val)
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True, generator=g)
    val_loader = DataLoader(val_ds, batch_size=256, shuffle=False)

    model = Regressor().to(device)
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(
        model.parameters(), lr=args.lr, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY
    )
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=LR_GAMMA)

    for epoch in range(1, args.epochs + 1):
        model.train()
        total_loss = 0.0
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            pred = model(x)
            loss = criterion(pred, y.unsqueeze(1))  # (n, 1) against (n, 1)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * x.size(0)
        scheduler.step()
        train_loss = total_loss / len(train_ds)

        model.eval()
        val_total, squared_error = 0.0, 0.0
        with torch.no_grad():
            for x, y in val_loader:
                x, y = x.to(device), y.to(device)
                pred = model(x)
                val_total += criterion(pred, y.unsqueeze(1)).item() * x.size(0)
                squared_error += ((pred.squeeze(1) - y) ** 2).sum().item()
        val_loss = val_total / len(val_ds)
        # R^2 against the val set's own variance: 0 means "no better than predicting the mean".
        val_r2 = 1.0 - squared_error / ((y_val - y_val.mean()) ** 2).sum().item()

        report(epoch=epoch, train_loss=train_loss, val_loss=val_loss, val_metric=val_r2)
        print(f"epoch {epoch:3d}  train {train_loss:.4f}  val {val_loss:.4f}  r2 {val_r2:.3f}")


if __name__ == "__main__":
    main()
