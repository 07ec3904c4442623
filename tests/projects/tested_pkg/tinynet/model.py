"""The model: a two-layer MLP with dropout."""

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, n_in: int, n_hidden: int, n_out: int, p: float = 0.1) -> None:
        super().__init__()
        self.hidden = nn.Linear(n_in, n_hidden)
        self.drop = nn.Dropout(p)
        self.out = nn.Linear(n_hidden, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(torch.relu(self.hidden(x))))
