"""A tiny loop whose hand-written mutants exercise the stillborn and equivalent rules
(tests/test_validity.py): each line a mutant changes is a statement of its own."""

import argparse

import torch
from torch import nn

from experiments.telemetry import report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    inputs = torch.randn(128, 8)
    labels = (inputs[:, 0] > 0).long()
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    lr = 0.1
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        model.train()
        for start in range(0, len(inputs), 32):
            optimizer.zero_grad()
            loss = loss_fn(model(inputs[start : start + 32]), labels[start : start + 32])
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val_loss = loss_fn(model(inputs), labels)
            accuracy = (model(inputs).argmax(1) == labels).float().mean()
        report(epoch=epoch, train_loss=loss, val_loss=val_loss, val_metric=accuracy)


if __name__ == "__main__":
    main()
