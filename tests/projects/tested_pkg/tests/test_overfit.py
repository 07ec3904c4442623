"""The check that catches most training bugs: a model must overfit one small batch."""

import torch
from torch import nn

from tinynet.model import MLP
from tinynet.train import accuracy, make_data, train_step


def test_overfits_one_batch():
    torch.manual_seed(0)
    x, y = make_data(16)
    model = MLP(4, 32, 3, p=0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    first = train_step(model, x, y, optimizer, criterion)
    for _ in range(150):
        last = train_step(model, x, y, optimizer, criterion)
    assert last < 0.05 * first
    assert accuracy(model, x, y) == 1.0
