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
