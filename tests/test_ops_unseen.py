"""Failure kinds of the operators seen on scripts nobody tuned on (issue 29), each pinned on
a small script: what is now a site, where, and what is rejected with which reason."""

from __future__ import annotations

from mutations.registry import get_operator
from mutator import SourceFile


def _survey(text: str, *names: str):
    return SourceFile(text, "unseen.py").survey([get_operator(name) for name in names])


def _sites(text: str, *names: str) -> list[tuple[str, int]]:
    return [(site.operator.name, site.line) for site in _survey(text, *names).sites]


def _rejected(text: str, *names: str) -> list[tuple[str, int, str]]:
    return [(r.site.operator.name, r.site.line, r.reason) for r in _survey(text, *names).rejected]


BATCH_IN_A_STEP = """\
import torch
from torch.utils.data import DataLoader


def fit(model, optimizer, train_set, bs):
    loader = DataLoader(train_set, batch_size=bs, shuffle=True, drop_last=True)
    for x, y in loader:
        hidden = torch.zeros(1, bs, 64)
        loss = model(x, hidden).sub(y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_batch_size_whose_setting_is_not_shown_and_that_sizes_the_step_is_rejected():
    """Where the size comes from (a caller elsewhere) is not in the file, and the hidden
    state of the training step is built from it: the loader alone cannot change."""
    (found,) = _rejected(BATCH_IN_A_STEP, "change_batch_size")
    assert found[:2] == ("change_batch_size", 6)
    assert "line 8" in found[2] and "shape" in found[2]
    assert _sites(BATCH_IN_A_STEP, "change_batch_size") == []


SKIPPED = """\
import torch
from torch.optim.lr_scheduler import ReduceLROnPlateau

groups = [{"params": a, "weight_decay": 0.1}, {"params": b, "weight_decay": 0.0}]
opt = torch.optim.AdamW(groups, lr=1e-3)
plain = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0)
sched = ReduceLROnPlateau(opt)
torch.manual_seed(0)
for epoch in range(3):
    for x, y in loader:
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    val_loss = evaluate(model)
    sched.step(val_loss)
torch.manual_seed(1)
"""


def test_places_recognised_and_skipped_are_listed_with_their_reason():
    """``--rejected`` lists every place that disappears (issue 29): each of these was a
    silent ``None`` before."""
    found = {
        (name, line): reason
        for name, line, reason in _rejected(
            SKIPPED,
            "weight_decay_too_high",
            "adam_l2_instead_of_adamw",
            "scheduler_step_before_optimizer_step",
            "drop_manual_seed",
        )
    }
    assert "every parameter group sets its own weight_decay" in found[("weight_decay_too_high", 5)]
    assert "weight_decay is 0" in found[("adam_l2_instead_of_adamw", 6)]
    assert "metric exists only after" in found[("scheduler_step_before_optimizer_step", 16)]
    assert (
        "line 17" in found[("drop_manual_seed", 8)] and "line 8" in found[("drop_manual_seed", 17)]
    )


TD_TARGET = """\
import torch

for step in range(100):
    with torch.no_grad():
        target = reward + gamma * target_net(next_state).max(1)[0]
    loss = (q_net(state).gather(1, action) - target).pow(2).mean()
    loss.backward()
"""


def test_a_no_grad_block_that_feeds_the_loss_is_listed_as_another_bug():
    (found,) = _rejected(TD_TARGET, "drop_no_grad")
    assert found[1] == 4 and "reach the training loss" in found[2]
