"""An MLP block with a hand-written tanh GELU, as transformer codebases write it."""

import math

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        h = self.c_fc(x)
        h = (
            0.5
            * h
            * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        )
        return self.head(F.relu(self.mish(self.c_proj(h))))

    def mish(self, x):
        return x * torch.tanh(F.softplus(x))


def main(steps=100):
    model = MLP()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(256, 32)
    y = (x[:, 0] * x[:, 1] > 0).long()
    for _step in range(steps):
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
