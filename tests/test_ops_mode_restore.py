"""Mode and grad-mode lines another line makes redundant (issue 22): no site, and the
script really trains the same with the line deleted."""

from __future__ import annotations

import pytest
from conftest import mutants, run_script, sites

# Helpers that clean up after themselves (LLMs-from-scratch's ``evaluate_model`` and
# ``generate_and_print_sample``): each epoch starts with ``model.train()`` anyway.
HELPERS = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.5), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(4)]
log = {"train_modes": [], "losses": []}


def evaluate_model(model):
    model.eval()
    with torch.no_grad():
        loss = nn.functional.cross_entropy(model(data[0][0]), data[0][1])
    model.train()
    return loss.item()


def generate_and_print_sample(model):
    model.eval()
    with torch.no_grad():
        print(model(torch.randn(1, 4)).argmax(1))
    model.train()


for epoch in range(2):
    model.train()
    for step, (x, y) in enumerate(data):
        log["train_modes"].append(model.training)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 2 == 0:
            log["losses"].append(evaluate_model(model))
    generate_and_print_sample(model)
"""

TOP, EVALUATE, SAMPLE = (
    "    model.train()\n    for step",
    "    model.train()\n    return",
    "    model.train()\n\n\nfor",
)


def test_redundant_train_calls_are_no_sites():
    found = sites(HELPERS, "drop_train_mode")
    # Only the evaluation helper's train() matters: training continues right after it.
    assert [site.line for site in found] == [HELPERS[: HELPERS.index(EVALUATE)].count("\n") + 1]
    swapped = sites(HELPERS, "eval_mode_before_training")
    assert sorted(site.line for site in swapped) == [
        HELPERS[: HELPERS.index(EVALUATE)].count("\n") + 1,
        HELPERS[: HELPERS.index(TOP)].count("\n") + 1,
    ]


torch = pytest.importorskip("torch")


def _log(source: str) -> dict:
    return run_script(source)["log"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(TOP, "    for step", id="drop-epoch-top"),
        pytest.param(SAMPLE, "\n\n\nfor", id="drop-sampler-end"),
        pytest.param(SAMPLE, SAMPLE.replace("train", "eval"), id="eval-at-sampler-end"),
    ],
)
def test_the_lines_judged_redundant_are_redundant(old, new):
    assert HELPERS.count(old) == 1
    reference = _log(HELPERS)
    assert reference["train_modes"] == [True] * 8
    assert _log(HELPERS.replace(old, new, 1)) == reference  # same modes, same losses


def test_the_line_judged_a_site_is_one():
    (mutant,) = mutants(HELPERS, "drop_train_mode")
    assert _log(mutant.source)["train_modes"] == [True, False, False, False] * 2


# Sampling methods decorated with inference_mode and only ever called with gradients off
# (lucidrains' GaussianDiffusion): neither the decorators nor the trainer's block are sites.
SAMPLER = """\
import torch
import torch.nn as nn


class Diffusion(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 4)

    @torch.inference_mode()
    def p_sample(self, x):
        return self.net(x)

    @torch.inference_mode()
    def sample(self, n):
        x = torch.randn(n, 4)
        for _ in range(3):
            x = self.p_sample(x)
        return x


model = Diffusion()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    loss = model.net(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    model.eval()
    with torch.inference_mode():
        images = model.sample(2)
    grad_free = not images.requires_grad
"""


def test_decorators_every_caller_already_covers_are_no_sites():
    assert sites(SAMPLER, "drop_no_grad") == []
    for dropped in (
        "    @torch.inference_mode()\n    def p_sample",
        "    @torch.inference_mode()\n    def sample",
    ):
        source = SAMPLER.replace(dropped, dropped.split("\n")[1], 1)
        assert run_script(source)["grad_free"]
    source = SAMPLER.replace(
        "    with torch.inference_mode():\n        images", "    if True:\n        images"
    )
    assert run_script(source)["grad_free"]
