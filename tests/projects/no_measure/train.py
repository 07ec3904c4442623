"""Classify two Gaussian blobs drawn from the seed; prints its training loss and nothing
about validation (no report(), no logger, no validation split)."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

torch.manual_seed(args.seed)
centers = torch.randn(2, 8)
y = torch.randint(0, 2, (512,))
x = centers[y] + 0.8 * torch.randn(512, 8)

model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(args.epochs):
    order = torch.randperm(len(x))
    for start in range(0, len(x), 32):
        batch = order[start : start + 32]
        optimizer.zero_grad()
        loss = loss_fn(model(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} train loss {loss.item():.4f}")
