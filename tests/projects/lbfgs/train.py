"""Predict the next value of a sine wave with LBFGS (closure style)."""

import argparse

import numpy as np
import torch
from torch import nn


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTMCell(1, 16)
        self.linear = nn.Linear(16, 1)

    def forward(self, inputs):
        h = torch.zeros(inputs.size(0), 16)
        c = torch.zeros(inputs.size(0), 16)
        outputs = []
        for value in inputs.split(1, dim=1):
            h, c = self.lstm(value, (h, c))
            outputs.append(self.linear(h))
        return torch.cat(outputs, dim=1)


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
opt = parser.parse_args()
np.random.seed(0)
torch.manual_seed(0)
data = torch.load("traindata.pt", weights_only=False)
inputs = torch.from_numpy(data[3:, :-1])
target = torch.from_numpy(data[3:, 1:])
test_input = torch.from_numpy(data[:3, :-1])
test_target = torch.from_numpy(data[:3, 1:])
seq = Sequence()
criterion = nn.MSELoss()
optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.5, max_iter=4)
for i in range(opt.steps):

    def closure():
        optimizer.zero_grad()
        out = seq(inputs)
        loss = criterion(out, target)
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        pred = seq(test_input)
        loss = criterion(pred, test_target)
        print("step", i, "test loss:", loss.item())
