"""A tiny regression on generated data, for tests/test_witness_corpus.py (which commits it
with its data module into a throwaway git mirror). Its last batch of each epoch is empty, so
its own loss is NaN there, as in some public scripts of the corpus."""

import torch
from tiny_data import make_data
from torch import nn

x, y = make_data()
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(4):
    model.train()
    for start in range(0, 80, 16):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x[start : start + 16]), y[start : start + 16])
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
