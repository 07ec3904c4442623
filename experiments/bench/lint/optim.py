"""Optimizer rules: learning rates and Adam's epsilon."""

from __future__ import annotations

import libcst as cst

from experiments.bench.lint.facts import resolve_number
from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import (
    adaptive_optimizer,
    callee_name,
    dotted_name,
    dotted_names_in,
    find_arg,
    manual_updates,
    number_value,
    optimizer_class,
)


class LargeLearningRate(LintRule):
    """A learning rate that is zero or negative, multiplied by a large factor, or far above
    the useful range of its optimizer (a literal, a constant, or an argparse default).

    Not "too large" when the same variable also drives a hand-written update (``p.data.add_(
    p.grad, alpha=-lr)``): that default was chosen for the manual SGD path, not for the
    optimizer on the other branch."""

    code = "TW501"
    category = "optim"
    summary = "suspicious learning rate"
    operators = ("scale_lr",)
    confidence = "medium"
    adaptive_lr_max = 0.05  # Adam-family rates this large diverge on most problems
    sgd_lr_max = 2.0
    # Recurrent language models clip gradient norms and use plain SGD at 20-30 (PyTorch's
    # word_language_model, AWD-LSTM): with clipping, each step is bounded by lr * max_norm.
    clipped_sgd_lr_max = 50.0
    # A literal factor of 1/100 or less on the rate itself: a lower rate for a backbone is
    # written as ``lr * 0.1`` in a parameter group, not as the optimizer's own rate.
    factor_min = 0.01
    invalid = (
        """
        import torch
        opt = torch.optim.Adam(model.parameters(), lr=0.5)  # <-
        """,
        """
        import torch
        LR = 0.1
        opt = torch.optim.SGD(model.parameters(), lr=LR * 100)  # <-
        """,
        """
        import torch
        opt = torch.optim.Adam(model.parameters(), lr=args.lr * 0.01)  # <-
        """,
        """
        import torch
        LR = 1.0
        def main():
            lr = LR
            opt = torch.optim.Adam(model.parameters(), lr=lr)  # <-
        """,
        """
        import torch
        parser.add_argument("--lr", type=float, default=0.0)
        args = parser.parse_args()
        opt = torch.optim.SGD(model.parameters(), lr=args.lr)  # <-
        """,
    )
    valid = (
        """
        import torch
        opt = torch.optim.Adam(model.parameters(), lr=3e-4)
        """,
        """
        import torch
        parser.add_argument("--lr", type=float, default=20)
        args = parser.parse_args()
        opt = torch.optim.SGD(model.parameters(), lr=args.lr)
        for x, y in loader:
            opt.zero_grad()
            criterion(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            opt.step()
        """,
        """
        import torch
        opt = torch.optim.SGD(model.parameters(), lr=args.lr * 0.1, momentum=0.9)
        """,
        """
        import torch
        opt = torch.optim.SGD(model.parameters(), lr=0.1 * args.batch_size / 256)
        """,
        """
        import torch
        head_opt = torch.optim.SGD(head.parameters(), lr=LR, momentum=0.9)
        backbone_opt = torch.optim.SGD(backbone.parameters(), lr=LR * 0.01, momentum=0.9)
        """,
        """
        import torch
        opt = torch.optim.AdamW(
            [{"params": head.parameters()}, {"params": backbone.parameters(), "lr": LR * 0.01}],
            lr=LR,
        )
        """,
        """
        import torch
        parser.add_argument("--lr", type=float, default=20)
        args = parser.parse_args()
        lr = args.lr
        if args.optimizer == "adamw":
            opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
        else:
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
        """,
    )

    def check(self, script: Script) -> Report:
        # Two optimizers may be discriminative rates (a backbone at ``LR * 0.01``).
        several = sum(1 for call in script.calls if optimizer_class(call, script.ctx)) > 1
        for call in script.calls:
            name = optimizer_class(call, script.ctx)
            lr = find_arg(call, keyword="lr", position=1) if name else None
            if lr is None:
                continue
            expr = lr.value
            if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
                factor = number_value(expr.right) or number_value(expr.left)
                small = factor is not None and 0 < factor <= self.factor_min and not several
                if factor is not None and (factor >= 10 or small):
                    yield call, f"learning rate multiplied by {factor:g}"
                    continue
            value = resolve_number(script, expr)
            if value is None:
                continue
            if value <= 0:
                yield call, f"learning rate {value:g}: the optimizer cannot move the weights"
            elif _drives_manual_update(script, expr):
                continue
            elif adaptive_optimizer(call, script.ctx) and value >= self.adaptive_lr_max:
                yield (
                    call,
                    f"learning rate {value:g} is very large for {name} (typical: 1e-4..3e-3)",
                )
            elif name == "SGD" and value >= self._sgd_max(script):
                yield call, f"learning rate {value:g} is very large for SGD"

    def _sgd_max(self, script: Script) -> float:
        clips = any(
            callee_name(call) in ("clip_grad_norm_", "clip_grad_norm") for call in script.calls
        )
        return self.clipped_sgd_lr_max if clips else self.sgd_lr_max


def _drives_manual_update(script: Script, lr: cst.BaseExpression) -> bool:
    """Does the learning rate (or a name assigned from it) also feed a hand-written update?"""
    name = dotted_name(lr)
    if name is None:
        return False
    aliases = {name} | {
        alias
        for alias, assigned in script.assignments.items()
        if any(dotted_name(value) == name for _, value in assigned)
    }
    return any(
        aliases & dotted_names_in(update, script.ctx) for update in manual_updates(script.ctx)
    )


class TinyAdamEps(LintRule):
    """An adaptive optimizer with ``eps`` below 1e-12: steps explode where the second moment
    is tiny."""

    code = "TW601"
    category = "numerics"
    summary = "Adam eps too small"
    operators = ("adam_eps_too_small",)
    invalid = (
        """
        import torch
        opt = torch.optim.Adam(p, lr=1e-3, eps=1e-16)  # <-
        """,
    )
    valid = (
        """
        import torch
        opt = torch.optim.Adam(p, lr=1e-3, eps=1e-8)
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            arg = find_arg(call, keyword="eps")
            value = number_value(arg.value) if arg is not None else None
            if value is not None and value < 1e-12 and adaptive_optimizer(call, script.ctx):
                yield call, f"eps={value:g}: steps explode where the second moment is tiny"


class AdamCoupledDecay(LintRule):
    """``torch.optim.Adam`` with a weight decay of 0.05 or more, a value chosen for AdamW:
    Adam adds it to the gradient as L2 and then divides it by the second moment, so weights
    with large gradients are barely decayed. L2 strengths used with Adam are 1e-5..1e-3.

    Only ``Adam`` itself; AdamW, SGD and the rest decay as their weight_decay says."""

    code = "TW508"
    category = "optim"
    summary = "AdamW-sized weight decay on Adam"
    operators = ("adam_l2_instead_of_adamw",)
    confidence = "medium"
    decay_min = 0.05
    invalid = (
        """
        import torch
        WEIGHT_DECAY = 0.1
        opt = torch.optim.Adam(model.parameters(), lr=3e-4, weight_decay=WEIGHT_DECAY)  # <-
        """,
    )
    valid = (
        """
        import torch
        opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
        """,
        """
        import torch
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        """,
        """
        import torch
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=args.wd)
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            if optimizer_class(call, script.ctx) != "Adam":
                continue
            decay = find_arg(call, keyword="weight_decay", position=4)
            value = resolve_number(script, decay.value) if decay is not None else None
            if value is not None and value >= self.decay_min:
                yield (
                    call,
                    f"Adam with weight_decay={value:g} couples the decay to the gradient"
                    " scale (AdamW decouples it)",
                )
