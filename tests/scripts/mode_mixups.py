"""Known forward counts: 2 training forwards in eval mode, 1 training forward in train
mode, 1 eval forward that builds a graph for nothing, 2 eval forwards under no_grad."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 4), torch.randn(16, 1)

model.eval()  # the bug: training in eval mode
for _ in range(2):
    optimizer.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
model.train()
optimizer.zero_grad()
nn.functional.mse_loss(model(x), y).backward()
optimizer.step()

model.eval()
wasted = model(x)  # validation without no_grad: a graph nobody uses
with torch.no_grad():
    model(x)
    model(x)
