"""The model, optimizer and scheduler factories that a_lib_train.py imports: a project
split over files, as most public training code is."""

import torch
import torch.nn as nn

MOMENTUM = 0.9
WARMUP_STEPS = 10


class ConvNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(8 * 4 * 4, classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def build_optimizer(model, lr):
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=MOMENTUM, nesterov=True)


def build_scheduler(optimizer, total_steps):
    def warmup_then_linear(step):
        if step < WARMUP_STEPS:
            return (step + 1) / WARMUP_STEPS
        return max(0.0, (total_steps - step) / max(1, total_steps - WARMUP_STEPS))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_then_linear)


def train_one_epoch(model, loader, optimizer, scheduler, criterion):
    model.train()
    for images, targets in loader:
        optimizer.zero_grad()
        loss = criterion(model(images), targets)
        loss.backward()
        optimizer.step()
        scheduler.step()
    return loss.item()
