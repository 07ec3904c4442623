"""A correct little training script (self-contained, so the engine finds its sites)."""

import argparse

import torch
from torch import nn

from experiments.telemetry import report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    inputs = torch.randn(256, 8)
    labels = (inputs[:, 0] + inputs[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        model.train()
        permutation = torch.randperm(len(inputs))
        for start in range(0, len(inputs), 32):
            batch = permutation[start : start + 32]
            x, y = inputs[batch].to(args.device), labels[batch].to(args.device)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val_loss = loss_fn(model(inputs), labels)
        report(epoch=epoch, train_loss=loss, val_loss=val_loss)
        print(f"epoch {epoch} val_loss {val_loss.item():.4f}")


if __name__ == "__main__":
    main()
