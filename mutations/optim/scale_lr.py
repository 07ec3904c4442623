"""The ``scale_lr`` operator (ScaleLr)."""

from __future__ import annotations

import libcst as cst

from mutations.optim._shared import DEFAULT_LR, _times, optimizer_call
from mutator.context import Context
from mutator.operator import Example, Param, Replacement, Swap
from mutator.semantics import (
    find_arg,
    hyperparameter_constants,
    manual_lr_writes,
    number_literal,
    optimizer_class,
    with_arg_value,
    with_keyword,
)
from mutator.semantics.config import config_setting, with_setting_value


class ScaleLr(Swap):
    """Multiply the learning rate given to the optimizer by ``factor``.

    Bug: a learning rate off by orders of magnitude (a wrong unit, ``1e-1`` typed for
    ``1e-3``, a value tuned for another optimizer or batch size). Impact: too high (x100)
    and the loss oscillates, spikes or turns NaN within a few steps; too low (x0.01) and
    the loss barely moves for the whole budget, which looks like a model that cannot
    learn. An optimizer without ``lr=`` gets its PyTorch default scaled. Fix: sweep the
    learning rate on a log scale and pick from the early-loss curve; rescale when the
    batch size or optimizer changes. Check: an LR range test, or overfit one batch (too
    low: it does not; too high: it diverges); log the update/weight ratio (~1e-3 is sane).
    """

    name = "scale_lr"
    category = "optim"
    summary = "Multiply the optimizer's learning rate by a factor (x100 by default, or x0.01)."
    expected = "breaks_training"
    witness = "factor optimizer.lr|manual_lr", "the learning rate at the first step is scaled"
    node_types = (cst.Call, cst.Assign, cst.AnnAssign, cst.DictElement)
    parameters = {
        "factor": Param(100.0, "multiplier applied to the learning rate", valid="(0, inf)")
    }
    variants = ({"factor": 0.01},)
    examples = (
        # No optimizer: the module-level constant the hand-written update reads is the lr.
        Example(
            before="""
                lr = 0.05
                for p in model.parameters():
                    p.data.add_(-lr * p.grad)
            """,
            after="""
                lr = 5.0
                for p in model.parameters():
                    p.data.add_(-lr * p.grad)
            """,
        ),
        # A hand-written schedule overwrites lr= before every step: it is the one site.
        Example(
            before="""
                import torch
                optimizer = torch.optim.AdamW(params, lr=6e-4)
                while True:
                    for param_group in optimizer.param_groups:
                        param_group["lr"] = lr
            """,
            after="""
                import torch
                optimizer = torch.optim.AdamW(params, lr=6e-4)
                while True:
                    for param_group in optimizer.param_groups:
                        param_group["lr"] = lr * 100
            """,
        ),
        # The annealing writes the rate from the config before the first update (issue 22,
        # cleanrl): scaling lr= would change nothing.
        Example(
            before="""
                import torch
                optimizer = torch.optim.Adam(params, lr=args.learning_rate)
                for iteration in range(1, args.num_iterations + 1):
                    optimizer.param_groups[0]["lr"] = frac(iteration) * args.learning_rate
            """,
            after="""
                import torch
                optimizer = torch.optim.Adam(params, lr=args.learning_rate)
                for iteration in range(1, args.num_iterations + 1):
                    optimizer.param_groups[0]["lr"] = frac(iteration) * args.learning_rate * 100
            """,
        ),
        # The current rate rescaled per batch and put back: lr= stays the base (AWD-LSTM).
        Example(
            before="""
                from torch.optim import SGD
                optimizer = SGD(params, lr=30)
                while i < n:
                    lr2 = optimizer.param_groups[0]["lr"]
                    optimizer.param_groups[0]["lr"] = lr2 * seq_len / bptt
            """,
            after="""
                from torch.optim import SGD
                optimizer = SGD(params, lr=3000)
                while i < n:
                    lr2 = optimizer.param_groups[0]["lr"]
                    optimizer.param_groups[0]["lr"] = lr2 * seq_len / bptt
            """,
        ),
        Example(
            before="""
                import torch
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            """,
            after="""
                import torch
                opt = torch.optim.Adam(model.parameters(), lr=0.1)
            """,
        ),
        Example(
            before="""
                from torch import optim
                opt = optim.AdamW(params, lr=args.lr)
            """,
            after="""
                from torch import optim
                opt = optim.AdamW(params, lr=args.lr * 100)
            """,
        ),
        Example(
            before="""
                from torch.optim import SGD
                opt = SGD(params, 0.1, momentum=0.9)
            """,
            after="""
                from torch.optim import SGD
                opt = SGD(params, 0.001, momentum=0.9)
            """,
            params={"factor": 0.01},
        ),
        Example(
            before="""
                import torch.optim as optim
                opt = optim.RMSprop(net.parameters())
            """,
            after="""
                import torch.optim as optim
                opt = optim.RMSprop(net.parameters(), lr=1.0)
            """,
        ),
        Example(
            before="""
                import torch
                opt = torch.optim.Adam(ps, lr=base_lr + extra)
            """,
            after="""
                import torch
                opt = torch.optim.Adam(ps, lr=(base_lr + extra) * 0.01)
            """,
            params={"factor": 0.01},
        ),
        # A config object handed to a trainer that builds the optimizer (issue 22).
        Example(
            before="""
                cfg.trainer.lr = 3e-4
                trainer = Trainer(model, cfg)
            """,
            after="""
                cfg.trainer.lr = 0.03
                trainer = Trainer(model, cfg)
            """,
        ),
    )
    non_examples = (
        """
            import torch
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1)
        """,
        "lr = 1e-3\n",
        """
            import torch
            opt = torch.optim.Adam(model.parameters(), **cfg)
        """,
        "run(model, lr=1e-3)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        setting = config_setting(node, ctx, "lr")
        if setting is not None:
            # ``cfg.trainer.lr = 3e-4`` handed to a trainer that builds the optimizer where
            # the script does not show (issue 22); an optimizer call here is the site.
            if manual_lr_writes(ctx) or any(optimizer_class(c, ctx) for c in ctx.nodes(cst.Call)):
                return None
            return with_setting_value(setting, _times(setting.value, self.params["factor"]))
        if isinstance(node, cst.Assign):
            if node in manual_lr_writes(ctx) or (
                # ``lr = 0.05`` at module level feeding a hand-written update
                not any(optimizer_class(call, ctx) for call in ctx.nodes(cst.Call))
                and any(node is c for c in hyperparameter_constants(ctx, "lr"))
            ):
                return node.with_changes(value=_times(node.value, self.params["factor"]))
            return None
        if manual_lr_writes(ctx):
            return None  # a hand-written schedule overwrites lr= before every step
        found = optimizer_call(node, ctx)
        if not (
            found is not None
            and (find_arg(found[0], "lr", 1) is not None or found[1] in DEFAULT_LR)
        ):
            return None
        assert isinstance(node, cst.Call)
        factor = self.params["factor"]
        lr = find_arg(node, "lr", 1)
        if lr is None:
            default = DEFAULT_LR[optimizer_class(node, ctx) or ""]
            return with_keyword(node, "lr", number_literal(default * factor))
        return with_arg_value(node, lr, _times(lr.value, factor))
