"""Regression on synthetic data, split with a negative end (a public idiom: the test set is
the last ``num_tests`` shuffled indices)."""

import argparse

import torch
from torch import nn


def train_test_split(n, test_size=0.25, seed=42):
    torch.manual_seed(seed)
    num_tests = int(n * test_size)
    indices = torch.randperm(n)
    train_index, test_index = indices[:-num_tests], indices[-num_tests:]
    return train_index, test_index


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    x = torch.randn(512, 8)
    y = x @ torch.randn(8, 1) + 0.1 * torch.randn(512, 1)
    train_index, test_index = train_test_split(len(x))
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _epoch in range(args.epochs):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x[train_index]), y[train_index])
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        test_loss = nn.functional.mse_loss(model(x[test_index]), y[test_index])
    print(f"train loss {loss.item():.4f} test loss {test_loss.item():.4f}")


if __name__ == "__main__":
    main()
