"""A regression script whose loss modules are named like the functions of
torch.nn.functional."""

import torch
from torch import nn

model = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))
mse_loss = nn.MSELoss()
l1_loss = nn.L1Loss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


def train(x, y, steps=100):
    for _step in range(steps):
        optimizer.zero_grad()
        pred = model(x)
        loss = mse_loss(pred, y) + 0.1 * l1_loss(pred, y)
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    inputs = torch.randn(256, 4)
    print(f"loss {train(inputs, inputs.sum(dim=1, keepdim=True)):.4f}")
