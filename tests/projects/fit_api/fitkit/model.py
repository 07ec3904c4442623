"""The model: an MLP with dropout."""

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, n_in: int = 8, n_hidden: int = 32, n_out: int = 3, p: float = 0.2) -> None:
        super().__init__()
        self.hidden = nn.Linear(n_in, n_hidden)
        self.drop = nn.Dropout(p)
        self.out = nn.Linear(n_hidden, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(torch.relu(self.hidden(x))))
