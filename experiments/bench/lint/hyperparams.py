"""Hyperparameters a script declares and then never uses."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import optimizer_class

# Constants whose only job is to configure the optimizer: defined and never read, training
# runs without the momentum or warmup the author chose. (Clipping settings: TW108.)
_STEP_SETTINGS = re.compile(r"MOMENTUM|WARMUP")
# Batch-norm momentum (``BN_MOMENTUM``) configures layers, not the optimizer.
_NORM = re.compile(r"BN|NORM")
# Ways a module constant is read without its name appearing: config dumps and overrides.
_DYNAMIC = re.compile(r"\bglobals\(\)|\bvars\(\)|\blocals\(\)|\bexec\(|__all__")


class UnusedStepSetting(LintRule):
    """A module-level constant that sets momentum or learning-rate warmup (``MOMENTUM =
    0.9``, ``WARMUP_STEPS = 100``) is never read: training runs without the setting its
    author chose.

    Only in a file that builds an optimizer or calls backward(). Silent when the file
    reads its constants dynamically (``globals()``, ``vars()``,
    ``exec`` of a config file, nanoGPT style) or lists them in ``__all__`` for other
    modules."""

    code = "TW506"
    category = "optim"
    summary = "momentum/warmup setting never used"
    operators = ("drop_momentum", "drop_lr_warmup")
    confidence = "medium"
    invalid = (
        """
        import torch
        MOMENTUM = 0.9  # <-
        LR = 0.1
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        """,
        """
        import torch
        ADAM_MOMENTUM = 0.9  # <-
        WARMUP_STEPS = 100  # <-
        for x, y in loader:
            opt.zero_grad()
            criterion(model(x), y).backward()
            opt.step()
        """,
    )
    valid = (
        """
        import torch
        MOMENTUM = 0.9
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=MOMENTUM)
        """,
        """
        import torch
        WARMUP_STEPS = 100
        def lr_at(step):
            return min(1.0, (step + 1) / WARMUP_STEPS)
        """,
        """
        import torch
        MOMENTUM = 0.9
        WARMUP_ITERS = 2000
        config = {k: v for k, v in globals().items() if not k.startswith("_")}
        """,
        """
        import torch
        MOMENTUM = 0.9
        parser.add_argument("--momentum", type=float, default=MOMENTUM)
        """,
        """
        MOMENTUM = 0.9
        WARMUP_STEPS = 500
        BATCH_SIZE = 64
        """,
        """
        import torch
        BN_MOMENTUM = 0.1
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        """,
    )

    def check(self, script: Script) -> Report:
        if _DYNAMIC.search(script.file.source) or not _trains(script):
            return  # a config module's constants are read by the scripts that import it
        counts: dict[str, int] = {}
        for name in script.ctx.nodes(cst.Name):
            counts[name.value] = counts.get(name.value, 0) + 1
        for statement in script.ctx.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
                    continue
                target = small.targets[0].target
                if not isinstance(target, cst.Name) or not target.value.isupper():
                    continue
                # The assignment is the only mention of the name in the file.
                setting = _STEP_SETTINGS.search(target.value) and not _NORM.search(target.value)
                if setting and counts[target.value] == 1:
                    yield small, f"{target.value} is set but never used"


def _trains(script: Script) -> bool:
    """Does the file build a torch optimizer or call backward() itself?"""
    return bool(script.calls_of("backward")) or any(
        optimizer_class(call, script.ctx) for call in script.calls
    )
