# The small classifier the logging-style scripts of this folder share (a project's own
# module, imported as "from digits import ..."): scikit-learn's 8x8 digits, an MLP,
# one epoch of SGD and an evaluation on the last 397 images.
import torch
import torch.nn as nn
from sklearn.datasets import load_digits


def load():
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    return (x[:1400], y[:1400]), (x[1400:], y[1400:])


def make_model(lr=0.1):
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    return model, torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9), nn.CrossEntropyLoss()


def train_epoch(model, optimizer, criterion, train, on_step=None):
    x, y = train
    model.train()
    for i in range(0, len(x), 64):
        loss = criterion(model(x[i : i + 64]), y[i : i + 64])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if on_step is not None:
            on_step(loss)
    return loss.item()


@torch.no_grad()
def evaluate(model, criterion, val):
    x, y = val
    model.eval()
    logits = model(x)
    return criterion(logits, y).item(), (logits.argmax(1) == y).float().mean().item()
