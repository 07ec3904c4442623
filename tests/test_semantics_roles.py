"""The static context of a site (mutator.semantics.roles): train, eval, setup, export,
plot or unknown, from where the node is."""

from __future__ import annotations

import libcst as cst

from mutator import SourceFile
from mutator.semantics import CONTEXTS, site_context

SCRIPT = """
import matplotlib.pyplot as plt
import torch
import torch.nn as nn

criterion = nn.CrossEntropyLoss()
eval_criterion = nn.MSELoss()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


def train(model, optimizer, batches):
    for x, y in batches:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()


def evaluate(model, batches):
    with torch.no_grad():
        return [eval_criterion(model(x), y) for x, y in batches]


def plot_curve(values):
    plt.plot(values[:10])


def export_onnx(model, path):
    torch.onnx.export(model, torch.randn(1, 4), path)


def manual(model, lr):
    with torch.no_grad():
        for p in list(model.parameters()):
            p -= lr * p.grad


def helper(x):
    return x * 2


def main():
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        train(model, optimizer, [])
        evaluate(model, [])
"""


def _contexts() -> dict[str, str]:
    """Code text of each call -> its context."""
    source = SourceFile(SCRIPT)
    ctx = source.context
    return {ctx.code(call): site_context(call, ctx) for call in ctx.nodes(cst.Call)}


def test_each_part_of_a_script_gets_its_context():
    found = _contexts()
    assert found["nn.Linear(4, 2)"] == "setup"  # a model's __init__
    assert found["self.fc(x)"] == "train"  # the model's forward runs in the training step
    assert found["loss.backward()"] == "train"
    assert found["criterion(model(x), y)"] == "train"
    assert found["eval_criterion(model(x), y)"] == "eval"
    assert found["plt.plot(values[:10])"] == "plot"
    assert found["torch.randn(1, 4)"] == "export"
    assert found["list(model.parameters())"] == "train"  # a hand-written update under no_grad
    assert found["Net()"] == "setup"  # main outside its training loop
    assert found["train(model, optimizer, [])"] == "train"  # the loop drives training
    assert set(found.values()) <= set(CONTEXTS)


def test_a_criterion_used_only_in_evaluation_is_eval_where_it_is_built():
    found = _contexts()
    assert found["nn.MSELoss()"] == "eval"
    assert found["nn.CrossEntropyLoss()"] == "setup"


def test_a_helper_nobody_calls_is_unknown():
    source = SourceFile(SCRIPT)
    ctx = source.context
    body = next(r for r in ctx.nodes(cst.Return) if ctx.code(r).startswith("return x * 2"))
    assert site_context(body, ctx) == "unknown"


TRAINER_THAT_LOGS_IMAGES = """
import torch
from torchvision.utils import make_grid, save_image


class Trainer:
    def _train_epoch(self, epoch):
        self.model.train()
        for data, target in self.data_loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(data), target)
            loss.backward()
            self.optimizer.step()
            self.writer.add_image("input", make_grid(data.cpu()))

    def _valid_epoch(self, epoch):
        self.model.eval()
        with torch.no_grad():
            for data, target in self.valid_data_loader:
                output = self.model(data)
                self.writer.add_image("input", make_grid(data.cpu()))

    def save_samples(self, images):
        save_image(images, "samples.png")
"""


def test_a_training_or_validation_epoch_that_logs_an_image_grid_keeps_its_role():
    """Public trainers (pytorch-template, denoising-diffusion's Trainer) log images from the
    training and validation epochs: those stay train and eval, not plotting code (issue 22)."""
    source = SourceFile(TRAINER_THAT_LOGS_IMAGES)
    ctx = source.context
    found = {ctx.code(call): site_context(call, ctx) for call in ctx.nodes(cst.Call)}
    assert found["loss.backward()"] == "train"
    assert found["self.model.train()"] == "train"
    assert found["self.model.eval()"] == "eval"
    assert found['save_image(images, "samples.png")'] == "plot"
