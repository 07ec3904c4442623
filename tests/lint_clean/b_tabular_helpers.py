"""Correct: tabular regression with module-level hyperparameters, data prepared in a
helper (train statistics only, targets built as (n, 1) columns), SGD with L2 decay, and
an evaluation that flattens predictions and targets for its metric."""

import argparse

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

LR = 0.05
MOMENTUM = 0.9
WEIGHT_DECAY = 5e-4
BATCH_SIZE = 32
HIDDEN = 64


def prepare(seed, n=600, n_features=8):
    rng = np.random.default_rng(seed)
    X = torch.tensor(rng.normal(size=(n, n_features)), dtype=torch.float32)
    y = X @ torch.arange(1.0, n_features + 1) + 0.1 * torch.randn(n)
    perm = torch.randperm(n)
    train_idx, val_idx = perm[:480], perm[480:]
    X_train, X_val = X[train_idx], X[val_idx]
    y_train, y_val = y[train_idx], y[val_idx]
    x_mean, x_std = X_train.mean(0), X_train.std(0) + 1e-8
    X_train = (X_train - x_mean) / x_std
    X_val = (X_val - x_mean) / x_std
    y_train, y_val = y_train.unsqueeze(1), y_val.unsqueeze(1)
    return TensorDataset(X_train, y_train), TensorDataset(X_val, y_val)


class Regressor(nn.Module):
    def __init__(self, n_features):
        super().__init__()
        self.hidden = nn.Linear(n_features, HIDDEN)
        self.norm = nn.BatchNorm1d(HIDDEN)
        self.out = nn.Linear(HIDDEN, 1)

    def forward(self, x):
        h = torch.relu(self.norm(self.hidden(x)))
        return self.out(h)


def evaluate(model, loader, criterion):
    model.eval()
    total, errors = 0.0, []
    with torch.no_grad():
        for x, y in loader:
            pred = model(x)
            total += criterion(pred, y).item() * x.size(0)
            errors.append((pred.squeeze(1) - y.view(-1)).abs())
    return total / len(loader.dataset), torch.cat(errors).mean().item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    train_ds, val_ds = prepare(args.seed)
    train_loader = DataLoader(train_ds, batch_size=BATCH_SIZE, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=256)
    model = Regressor(train_ds.tensors[0].shape[1])
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(
        model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY
    )
    for epoch in range(args.epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        val_loss, val_mae = evaluate(model, val_loader, criterion)
        print(f"epoch {epoch} val {val_loss:.4f} mae {val_mae:.3f}")


if __name__ == "__main__":
    main()
