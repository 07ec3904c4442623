"""Train a classifier; an optional fine-tuning phase runs only with --finetune."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--finetune", action="store_true")
args = parser.parse_args()

x = torch.randn(256, 8)
y = (x.sum(dim=1) > 0).long()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(args.epochs):
    for start in range(0, 256, 32):
        optimizer.zero_grad()
        loss = loss_fn(model(x[start : start + 32]), y[start : start + 32])
        loss.backward()
        optimizer.step()

if args.finetune:
    finetuner = torch.optim.Adam(model.parameters(), lr=0.001)
    for start in range(0, 256, 32):
        finetuner.zero_grad()
        loss = loss_fn(model(x[start : start + 32]), y[start : start + 32])
        loss.backward()
        finetuner.step()
print(f"loss {loss.item():.4f}")
