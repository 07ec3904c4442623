"""Train the MLP from model.py on a synthetic 3-class problem."""

import argparse

import torch
from torch import nn

from model import MLP

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.manual_seed(args.seed)
x = torch.randn(300, 6)
y = (x[:, :3].argmax(dim=1)).long()
model = MLP(6, 32, 3)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()
for epoch in range(args.epochs):
    model.train()
    for start in range(0, 300, 50):
        optimizer.zero_grad()
        loss = criterion(model(x[start : start + 50]), y[start : start + 50])
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: {loss.item():.4f}")
