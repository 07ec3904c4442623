"""Hand-written learning-rate schedules (mutator.semantics.schedules, issue 29)."""

from __future__ import annotations

import libcst as cst

from mutator import SourceFile
from mutator.semantics.schedules import lr_schedule_of

SCRIPT = """
import torch

def cosine(step):
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / (max_steps - warm)))

def adjust(optimizer, epoch):
    lr = base * (epoch - start) / (max_epoch - start)
    for g in optimizer.param_groups:
        g["lr"] = lr

class Warmup(torch.optim.lr_scheduler.LRScheduler):
    def get_values(self):
        return [b * (self.last_epoch - s) / (max_e - s) for b in self.base_lrs]

sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s - w) / (max_s - w))
other = torch.optim.lr_scheduler.LambdaLR(opt, cosine)

def standardize(x):
    return (x - x.mean()) / x.std()
"""


def _schedules() -> dict[int, str | None]:
    source = SourceFile(SCRIPT)
    ctx = source.context
    return {
        ctx.position(node).start.line: lr_schedule_of(node, ctx)
        for node in ctx.nodes(cst.BinaryOperation)
        if isinstance(node.operator, cst.Divide)
    }


def test_a_schedule_is_told_by_its_name_its_lr_write_its_class_and_its_scheduler():
    found = _schedules()
    assert found[5] == "cosine"  # handed to LambdaLR (and nothing in its name says so)
    assert found[8] == "adjust"  # writes param_groups' rate
    assert found[14] == "get_values"  # a method of a scheduler class
    assert found[16] == "lambda"  # a lambda handed to LambdaLR
    assert found[20] is None  # a standardisation of data
