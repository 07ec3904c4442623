"""An MNIST-style classifier whose vision package is not installed here."""

import torch
import trainwreck_fixture_vision_missing as vision  # not installed: ModuleNotFoundError
from torch import nn

model = nn.Linear(784, 10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for images, labels in vision.loader():
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(images.view(-1, 784)), labels)
    loss.backward()
    optimizer.step()
