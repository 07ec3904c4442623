"""The ``drop_lr_warmup`` operator (DropLrWarmup)."""

from __future__ import annotations

import re

import libcst as cst

from mutations.optim._warmup import (
    has_structural_warmup,
    structural_warmup_edits,
    warmup_comparison,
)
from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    callee_name,
    dotted_name,
    find_arg,
    method_name,
    number_value,
)

_WARMUP_CONSTANT = re.compile(r"warmup", re.IGNORECASE)
_DIVIDES = (cst.Divide, cst.FloorDivide, cst.Modulo)


def _zero_safe_use(use: cst.Name, ctx: Context) -> bool:
    """Would ``use`` survive the value 0: never a bare divisor, or only behind
    ``max(1, ...)`` or inside ``if step < warmup:`` (never taken at 0)?"""
    child: cst.CSTNode = use
    clamped = False
    for ancestor in ctx.ancestors(use):
        if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
            return True
        if (
            isinstance(ancestor, cst.Call)
            and callee_name(ancestor) == "max"
            and any((number_value(a.value) or 0) > 0 for a in ancestor.args)
        ):
            clamped = True
        if (
            isinstance(ancestor, cst.BinaryOperation)
            and isinstance(ancestor.operator, _DIVIDES)
            and ancestor.right is child
            and not clamped
        ):
            return False
        if (
            isinstance(ancestor, (cst.If, cst.IfExp))
            and ancestor.body is child
            and warmup_comparison(ancestor.test, ctx)
        ):
            return True
        child = ancestor
    return True


def _constant_warmup(node: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    """(name, literal) of ``warmup_steps = 100``, ``self.warmup = 500``, a dataclass field
    ``warmup_steps: int = 100`` or ``add_argument("--warmup-steps", default=100)``."""
    if isinstance(node, cst.Assign) and len(node.targets) == 1:
        target, value = node.targets[0].target, node.value
    elif isinstance(node, cst.AnnAssign) and node.value is not None:
        target, value = node.target, node.value
    elif isinstance(node, cst.Call) and method_name(node) == "add_argument":
        flag = node.args[0].value if node.args else None
        default = find_arg(node, "default")
        if not isinstance(flag, cst.SimpleString) or default is None:
            return None
        name = str(flag.evaluated_value).lstrip("-").replace("-", "_")
        return (name, default.value) if _is_positive_warmup(name, default.value) else None
    else:
        return None
    name = dotted_name(target)
    if name is None:
        return None
    name = name.rsplit(".", 1)[-1]
    return (name, value) if _is_positive_warmup(name, value) else None


def _is_positive_warmup(name: str, value: cst.BaseExpression) -> bool:
    return bool(_WARMUP_CONSTANT.search(name)) and (number_value(value) or 0) > 0


class DropLrWarmup(Operator):
    """Remove the learning-rate warmup.

    Bug: training starts at the full learning rate. Sites: the ramp of a ``LambdaLR``
    function (``min(1.0, (step + 1) / warmup_steps)`` -> ``1.0``; ``if step < warmup:
    return ...`` deleted), a manual warmup branch, ``num_warmup_steps`` of a
    ``get_*_schedule_with_warmup`` set to 0, a ramping ``LinearLR`` made flat, and, only
    where none of these exists, the warmup constant set to 0 when no unguarded division
    by it would follow. Impact: Adam's second-moment estimates are noisy in the first
    steps, so full-size updates can spike the loss or diverge (transformers, large
    batches); small models usually just train a little less smoothly. Fix: ramp the LR
    up linearly over the first ~1-5% of steps. Check: plot the LR schedule and the loss
    of the first few hundred steps (early spikes, grad-norm bursts).
    """

    name = "drop_lr_warmup"
    category = "optim"
    summary = "Remove the learning-rate warmup: training starts at the full learning rate."
    expected = "degrades"
    witness = "differs lr", "the learning rates differ (no warmup)"
    node_types = (cst.Call, cst.If, cst.IfExp, cst.Assign, cst.AnnAssign)
    examples = (
        Example(
            before="""
                from torch.optim.lr_scheduler import LambdaLR
                sched = LambdaLR(opt, lambda step: min(1.0, (step + 1) / warmup_steps))
            """,
            after="""
                from torch.optim.lr_scheduler import LambdaLR
                sched = LambdaLR(opt, lambda step: 1.0)
            """,
        ),
        Example(
            before="""
                import torch

                def lr_lambda(step):
                    if step < warmup_steps:
                        return step / max(1, warmup_steps)
                    return max(0.0, 1 - step / total)

                sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
            """,
            after="""
                import torch

                def lr_lambda(step):
                    return max(0.0, 1 - step / total)

                sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
            """,
        ),
        Example(
            before="""
                import math
                from torch.optim import lr_scheduler
                f = lambda s: min(s / WARMUP, 1.0) * 0.5 * (1 + math.cos(math.pi * s / T))
                sched = lr_scheduler.LambdaLR(opt, lr_lambda=f)
            """,
            after="""
                import math
                from torch.optim import lr_scheduler
                f = lambda s: 0.5 * (1 + math.cos(math.pi * s / T))
                sched = lr_scheduler.LambdaLR(opt, lr_lambda=f)
            """,
        ),
        Example(
            before="""
                for step, batch in enumerate(loader):
                    if step < args.warmup:
                        for g in opt.param_groups:
                            g['lr'] = lr * (step + 1) / args.warmup
                    train_step(batch)
            """,
            after="""
                for step, batch in enumerate(loader):
                    train_step(batch)
            """,
        ),
        # A per-batch warm-up class: the Transformer's Noam rate (issue 29).
        Example(
            before="""
                class NoamOpt:
                    def rate(self, step):
                        return self.factor * (self.size ** (-0.5) * min(step ** (-0.5), step * self.warmup ** (-1.5)))
            """,
            after="""
                class NoamOpt:
                    def rate(self, step):
                        return self.factor * (self.size ** (-0.5) * step ** (-0.5))
            """,
        ),
        Example(
            before="""
                from transformers import get_linear_schedule_with_warmup
                sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=500, num_training_steps=total)
            """,
            after="""
                from transformers import get_linear_schedule_with_warmup
                sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=0, num_training_steps=total)
            """,
        ),
        Example(
            before="""
                from torch.optim.lr_scheduler import LinearLR
                warm = LinearLR(opt, start_factor=0.01, total_iters=100)
            """,
            after="""
                from torch.optim.lr_scheduler import LinearLR
                warm = LinearLR(opt, start_factor=1.0, total_iters=100)
            """,
        ),
        Example(
            before="""
                WARMUP_STEPS = 200
                sched = build_scheduler(opt, warmup_steps=WARMUP_STEPS, total_steps=10_000)
            """,
            after="""
                WARMUP_STEPS = 0
                sched = build_scheduler(opt, warmup_steps=WARMUP_STEPS, total_steps=10_000)
            """,
        ),
        Example(
            before="""
                parser.add_argument("--warmup-steps", type=int, default=100)
                run(args.warmup_steps)
            """,
            after="""
                parser.add_argument("--warmup-steps", type=int, default=0)
                run(args.warmup_steps)
            """,
        ),
    )
    non_examples = (
        # Setting this constant to 0 would divide by zero.
        """
            warmup_steps = 100
            factor = (step + 1) / warmup_steps
        """,
        # A decay, not a warmup.
        """
            from torch.optim.lr_scheduler import LinearLR
            d = LinearLR(opt, start_factor=1.0, end_factor=0.1)
        """,
        "x = min(1.0, a / b)\n",
        """
            def f(step):
                if step < total_steps:
                    return 1.0
                return 0.5
        """,
        "warmup_steps = 0\n",
        # A warm-up of something else than the learning rate (issue 29).
        """
            for epoch in range(epochs):
                if epoch < args.warmup_epochs:
                    model.backbone.requires_grad_(False)
                else:
                    model.backbone.requires_grad_(True)
                train_one_epoch(model, loader)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        structural = structural_warmup_edits(node, ctx)
        if structural is not None:
            return structural
        constant = _constant_warmup(node)
        if constant is None:
            return None
        name, value = constant
        if not all(_zero_safe_use(use, ctx) for use in ctx.nodes(cst.Name) if use.value == name):
            return None
        if has_structural_warmup(ctx):
            return None  # the schedule itself is the site
        zero = cst.Integer("0") if isinstance(value, cst.Integer) else cst.Float("0.0")
        return {value: zero}
