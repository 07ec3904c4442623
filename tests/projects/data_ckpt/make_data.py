"""Make data/train.pt: two Gaussian blobs."""

import os

import torch

torch.manual_seed(0)
x = torch.cat([torch.randn(128, 4) + 1.0, torch.randn(128, 4) - 1.0])
y = torch.cat([torch.zeros(128), torch.ones(128)]).long()
os.makedirs("data", exist_ok=True)
torch.save({"x": x, "y": y}, os.path.join("data", "train.pt"))
