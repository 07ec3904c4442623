"""A few-millisecond training loop shared by the test scripts (imported through
``sys.path[0]``, which the harness sets to the script's folder)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from torch import nn

from experiments.telemetry import report


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lr", type=float, default=0.1)
    return parser.parse_args(argv)


def train(
    args: argparse.Namespace, on_step: Callable[[int, torch.Tensor], None] | None = None
) -> float:
    torch.manual_seed(args.seed)
    inputs = torch.randn(256, 8)
    labels = (inputs[:, 0] + inputs[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    loss = torch.zeros(())
    for epoch in range(args.epochs):
        model.train()
        for start in range(0, len(inputs), 32):
            x = inputs[start : start + 32].to(args.device)
            y = labels[start : start + 32].to(args.device)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            step += 1
            if on_step is not None:
                on_step(step, loss)
        model.eval()
        with torch.no_grad():
            val_loss = loss_fn(model(inputs), labels)
        report(epoch=epoch, train_loss=loss, val_loss=val_loss)
    return float(loss.detach())
